"""What a job on one slot gets: the slot's engine, under the slot's identity, behind the filter.

    job --/var/run/docker.sock--> filter (proxy/, in the service) --> the slot's engine

`serve`, `runner slot-endpoint` and `runner audit` all bring a slot up through this one class.
With the rootless engine (the default) the engine is the slot's own daemon (slot_engine.py);
with the shared engine it is the host's daemon at docker_url and only the filter holds.
Each slot's filter runs in a thread and event loop of its own: one slot's traffic never waits
for another's. `reset()` (the service's cycle between jobs, and `runner reset-slot` through the
slot's control socket, slot_control.py) empties the slot's engine whatever its labels
(slot_reset.py); the filter's socket, the job's DOCKER_HOST, stays where it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from repro_gate.errors import ConfigError, ErrorKind, GateError, one_line
from repro_gate.runner.proxy.pins import Pins
from repro_gate.runner.proxy.policy import SlotPolicy
from repro_gate.runner.proxy.server import serve as serve_filter
from repro_gate.runner.registration import runner_name_stem
from repro_gate.runner.runner_config import EngineKind, RunnerConfig
from repro_gate.runner.slot_control import Answer, ControlAnswer, ControlServer, control_socket
from repro_gate.runner.slot_engine import SlotEngine, launcher
from repro_gate.runner.slot_folders import ROOT, Owner, SlotFolders
from repro_gate.runner.slot_identity import GPU_GROUPS, SlotIdentity
from repro_gate.runner.slot_reset import Keep, ResetReport, reset_engine
from repro_gate.runner.slots import Slot

FILTER_START_SECONDS = 10.0
WATCH_SECONDS = 1.0  # how often the engine is checked; a dead one is started again
RESTART_RETRY_SECONDS = 10.0
LOCK_FILE = "endpoint.lock"


def unix_socket(docker_url: str) -> Path:
    """The shared daemon's socket: the filter forwards to it, so it must be a Unix socket."""
    if not docker_url.startswith("unix://"):
        raise ConfigError(f"docker_url {docker_url}: the runner service needs the daemon's Unix"
                          " socket (unix:///…): its per-slot filters forward to it")
    return Path(docker_url.removeprefix("unix://"))


def reserved_names(config: RunnerConfig) -> tuple[str, ...]:
    """Name prefixes of the service's own (runner) containers: no job may take them."""
    return (runner_name_stem(config.name_prefix, config.host),)


class SlotEndpoint:
    """`with SlotEndpoint(config, slot) as endpoint:`; `endpoint.socket` is a job's DOCKER_HOST."""

    def __init__(self, config: RunnerConfig, slot: Slot,
                 say: Callable[[str], None] = lambda _: None) -> None:
        self.config = config
        self.slot = slot
        self.say = say  # one log line about this slot
        self.folders = SlotFolders.under(config.work_root, slot)
        self.rootless = config.isolation.engine is EngineKind.ROOTLESS
        self.owner: Owner = ROOT
        self.engine: SlotEngine | None = None
        self.filter: FilterThread | None = None
        self.stopping = threading.Event()
        self.lock: int | None = None
        self.watcher: threading.Thread | None = None
        self.control: ControlServer | None = None
        self.pins: Pins | None = None  # a slot's own engine only (the service then has root)
        # The watcher and a reset both start the engine: one at a time.
        self.engine_lock = threading.Lock()

    @property
    def socket(self) -> Path:
        """The filter's socket: what a job gets as /var/run/docker.sock."""
        return self.folders.proxy_socket

    @property
    def engine_url(self) -> str:
        """The engine the service itself talks to (runner containers, cleanup)."""
        return self.engine.url if self.engine is not None else self.config.docker_url

    def start(self) -> None:
        """The slot's engine, then its filter; on any failure, what was started is stopped."""
        if self.rootless:
            self.owner = SlotIdentity.of(self.config, self.slot).owner()
            self.engine = SlotEngine(launcher(self.config), self.owner, self.folders)
        self.folders.create(self.owner, engine=self.rootless)
        self._hold_slot()
        try:
            self._start_engine_and_filter()
        except BaseException:
            self.stop()
            raise

    def _start_engine_and_filter(self) -> None:
        upstream = unix_socket(self.engine_url)
        if self.engine is not None:
            self.pins = Pins(self.folders.pins, self.folders.work.resolve(),
                             frozenset({self.socket.absolute()}))
            self.pins.prepare()  # before the engine: its mount namespace receives every pin
            self.engine.start()
            self.watcher = threading.Thread(target=self._watch, args=(self.engine,),
                                            name=f"slot{self.slot.index}-engine", daemon=True)
            self.watcher.start()
        policy = SlotPolicy(gpu_uuid=self.slot.uuid, work_folder=self.folders.work.resolve(),
                            allowed_capabilities=self.config.allowed_capabilities,
                            reserved_names=reserved_names(self.config),
                            gpu_groups=GPU_GROUPS if self.rootless else (),
                            repository=self.config.isolation.dedicated_repository)
        self.filter = FilterThread(policy, self.socket, upstream, self.slot.index, self.pins)
        self.filter.start()
        self.control = ControlServer(control_socket(self.config.work_root, self.slot),
                                     self._control_reset)

    def _hold_slot(self) -> None:
        """One endpoint per slot on a host: a second engine on the same data root, or a second
        filter on the same socket, would break the first. The kernel drops the lock with the
        process, however it ends."""
        descriptor = os.open(self.folders.base / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise GateError(f"slot {self.slot.index} is in use by another repro-gate runner"
                            " process (serve, slot-endpoint or audit): stop it first",
                            kind=ErrorKind.LOCKED) from None
        self.lock = descriptor

    def _watch(self, engine: SlotEngine) -> None:
        """An engine that died (killed, out of memory) is started again: the slot's cycle
        waits for its daemon to come back, as for a restart of the shared one."""
        while not self.stopping.wait(WATCH_SECONDS):
            with self.engine_lock:
                if engine.running() or self.stopping.is_set():
                    continue
                self.say(f"the slot's engine stopped ({engine.exit_status()}); starting it"
                         " again")
                try:
                    engine.start()
                    self.say("the slot's engine is back")
                    continue
                except GateError as error:
                    self.say(f"{error}; trying again in {RESTART_RETRY_SECONDS:g} s")
            self.stopping.wait(RESTART_RETRY_SECONDS)

    def reset(self, keep_caches: bool = True) -> ResetReport:
        """Empty the slot's engine, whatever its labels, and wipe its folders
        (slot_reset.py); `keep_caches` False drops even a dedicated repository's environment
        caches (a job of another repository came). GateError when the engine does not start
        again, or with the shared engine, which is not reset."""
        if self.engine is None:
            raise GateError(f"slot {self.slot.index}: the shared engine (the host's daemon) is"
                            " not reset between jobs: only the slot's own engine is",
                            kind=ErrorKind.CONFIG)
        repository = self.config.isolation.dedicated_repository
        keep = Keep(self.config.runner.image, repository if keep_caches else None)
        with self.engine_lock:
            report = reset_engine(self.engine, self.folders, keep, self.pins)
        return report

    def _control_reset(self) -> ControlAnswer:
        """A reset asked for on the control socket (`runner reset-slot`)."""
        self.say("reset asked for on the control socket")
        try:
            report = self.reset()
        except Exception as error:  # the answer, not a traceback in the holder's log
            why = str(error) if isinstance(error, GateError) else (
                f"{type(error).__name__}: {one_line(error)}")
            self.say(f"reset failed: {why}")
            return ControlAnswer(Answer.ERROR, why)
        if report.fresh:
            self.say(f"reset: the engine is fresh ({report.seconds:.1f} s)")
            return ControlAnswer(Answer.FRESH, "")
        survivors = ", ".join(report.survivors)
        self.say(f"survived the reset: {survivors}")
        return ControlAnswer(Answer.SURVIVED, survivors)

    def stop(self) -> None:
        """Everything start() started, in reverse; safe to call twice."""
        self.stopping.set()
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.watcher is not None:
            self.watcher.join()
            self.watcher = None
        if self.filter is not None:
            self.filter.stop()
            self.filter = None
        if self.engine is not None:
            self.engine.stop()
        if self.pins is not None:
            self.pins.close()
            self.pins = None
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None

    def __enter__(self) -> SlotEndpoint:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


class FilterThread:
    """One slot's filter in an asyncio loop of its own thread."""

    def __init__(self, policy: SlotPolicy, listen: Path, upstream: Path, index: int,
                 pins: Pins | None = None) -> None:
        self.policy = policy
        self.pins = pins
        self.listen = listen
        self.upstream = upstream
        self.loop = asyncio.new_event_loop()
        self.task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"slot{index}-filter", daemon=True)

    def start(self) -> None:
        """Start it and wait until its socket listens."""
        self.listen.unlink(missing_ok=True)  # a stale socket of a killed service
        self.thread.start()
        deadline = time.monotonic() + FILTER_START_SECONDS
        while not self.listen.exists():
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise GateError(f"the slot's Docker filter did not start: {self.error}",
                                kind=ErrorKind.DOCKER)
            time.sleep(0.05)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(serve_filter(self.policy, self.listen, self.upstream,
                                                       self.pins))
        try:
            self.loop.run_until_complete(self.task)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # reported by start()
            self.error = error
        finally:
            self.loop.close()

    def stop(self) -> None:
        if self.task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(FILTER_START_SECONDS)
