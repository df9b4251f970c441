"""`repro-gate runner serve`: start-up, one job cycle per slot, drain on SIGTERM/SIGINT.

Start-up, in this order, and nothing is started before the checks pass (each failure is one
line and exit 2): the configuration and slots -> the Docker daemon answers -> the runner image
is present or pulled by digest -> orphans of an earlier run removed (containers with the
service's or a slot's label; the service's runners GitHub lists as offline or not busy) -> the
job-started hook installed -> one Docker API proxy per slot (asyncio, in a thread) -> /metrics
-> one thread per slot running `SlotCycle`.

A signal sets the drain: no new registrations, idle runners deregistered and removed, busy jobs
given `drain_timeout`; the service exits 0 when every slot has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from prometheus_client import CollectorRegistry

from repro_gate.errors import ConfigError, ErrorKind, GateError, ReproGateError, one_line
from repro_gate.runner import hook
from repro_gate.runner.containers import (
    SERVICE_LABEL,
    Daemon,
    DockerFailure,
    connect,
    service_label,
)
from repro_gate.runner.metrics import MetricsServer, ServiceMetrics, SlotState, serve_metrics
from repro_gate.runner.proxy.ownership import SLOT_LABEL
from repro_gate.runner.proxy.policy import SlotPolicy
from repro_gate.runner.proxy.server import serve as serve_proxy
from repro_gate.runner.registration import Registrar, runner_name_stem
from repro_gate.runner.runner_config import RunnerConfig
from repro_gate.runner.slot_cycle import JIT_VARIABLE, SlotCycle, SlotFolders, wipe
from repro_gate.runner.slots import Slot

LOG_PREFIX = "repro-gate runner: "
PROXY_START_SECONDS = 10.0
JOIN_SECONDS = 0.5  # the main thread wakes this often, so that signals are handled
_emit_lock = threading.Lock()


def emit(line: str) -> None:
    """One log line on stderr; lines of several threads never interleave."""
    with _emit_lock:
        sys.stderr.write(f"{LOG_PREFIX}{line}\n")
        sys.stderr.flush()


def unix_socket(docker_url: str) -> Path:
    """The daemon's socket: the proxies forward to it, so it must be a Unix socket."""
    if not docker_url.startswith("unix://"):
        raise ConfigError(f"docker_url {docker_url}: the runner service needs the daemon's Unix"
                          " socket (unix:///…): its per-slot proxies forward to it")
    return Path(docker_url.removeprefix("unix://"))


def check_environment(config: RunnerConfig, slots: list[Slot]) -> None:
    """runner.environment may not set what the service sets itself."""
    own = {JIT_VARIABLE}
    for slot in slots:
        own |= set(hook.runner_environment(slot, allow_no_gpu=True))
    for key, _ in config.runner.environment:
        if key in own:
            raise ConfigError(f"{config.config_file}: runner.environment.{key}: is set by the"
                              " service itself")


class Proxies:
    """One Docker API proxy per slot, each in an asyncio loop of its own thread: one slot's
    traffic never waits for another's."""

    def __init__(self, policies: list[tuple[SlotPolicy, Path]], upstream: Path) -> None:
        self.policies = policies
        self.upstream = upstream
        self.loops = [asyncio.new_event_loop() for _ in policies]
        self.tasks: list[asyncio.Task[None] | None] = [None] * len(policies)
        self.threads = [threading.Thread(target=self._run, args=(index,), daemon=True,
                                         name=f"docker-proxy{index}")
                        for index in range(len(policies))]

    def start(self) -> None:
        """Start them and wait until every socket listens."""
        for _, listen in self.policies:
            listen.unlink(missing_ok=True)  # a stale socket of a killed service
        for thread in self.threads:
            thread.start()
        deadline = time.monotonic() + PROXY_START_SECONDS
        while not all(listen.exists() for _, listen in self.policies):
            alive = all(thread.is_alive() for thread in self.threads)
            if time.monotonic() > deadline or not alive:
                raise GateError("the per-slot Docker proxies did not start",
                                kind=ErrorKind.DOCKER)
            time.sleep(0.05)

    def _run(self, index: int) -> None:
        loop = self.loops[index]
        asyncio.set_event_loop(loop)
        policy, listen = self.policies[index]
        task = self.tasks[index] = loop.create_task(serve_proxy(policy, listen, self.upstream))
        (result,) = loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        if isinstance(result, Exception):
            emit(f"a Docker proxy stopped: {one_line(result)}")
        loop.close()

    def stop(self) -> None:
        for loop, task in zip(self.loops, self.tasks, strict=True):
            if task is not None:
                with contextlib.suppress(RuntimeError):  # that proxy has already ended
                    loop.call_soon_threadsafe(task.cancel)
        for thread in self.threads:
            if thread.is_alive():
                thread.join(PROXY_START_SECONDS)


def clean_orphans(config: RunnerConfig, slots: list[Slot], daemon: Daemon,
                  registrar: Registrar) -> None:
    """What a killed service left: its containers and its runners' registrations."""
    labels = [f"{SERVICE_LABEL}={service_label(config.name_prefix, config.host)}",
              *(f"{SLOT_LABEL}={slot.uuid}" for slot in slots)]
    for label in labels:
        for name in daemon.remove_labelled(label):
            emit(f"orphan container removed: {name}")
    own = runner_name_stem(config.name_prefix, config.host)
    try:
        runners = registrar.list_runners()
    except ReproGateError as error:  # the slots retry GitHub themselves; say it and go on
        emit(f"orphan registrations not cleaned: {error}")
        return
    for runner in runners:
        if not runner.name.startswith(own) or (runner.status != "offline" and runner.busy):
            continue  # busy and online: GitHub drops it when its job fails without a runner
        try:
            registrar.delete(runner.id)
            emit(f"orphan registration deleted: {runner.name} (id {runner.id})")
        except ReproGateError as error:
            emit(f"orphan registration {runner.name} not deleted: {error}")


class Service:
    """The running service: its proxies, metrics endpoint and slot threads."""

    server: MetricsServer | None
    proxies: Proxies
    registrar: Registrar

    def __init__(self, config: RunnerConfig, slots: list[Slot]) -> None:
        self.config = config
        self.slots = slots
        self.drain = threading.Event()
        self.registry = CollectorRegistry()
        self.metrics = ServiceMetrics(config.pool, self.registry)
        self.folders = {slot.index: SlotFolders.under(config.work_root, slot) for slot in slots}

    @property
    def reserved_names(self) -> tuple[str, ...]:
        """The names of the service's own containers (runners, output readers): no job's."""
        return (runner_name_stem(self.config.name_prefix, self.config.host), "output-")

    def start_up(self) -> None:
        """Every check and clean-up before a slot runs; GateError/ConfigError stop it here."""
        upstream = unix_socket(self.config.docker_url)
        check_environment(self.config, self.slots)
        daemon = connect(self.config.docker_url)
        self.registrar = Registrar(self.config)
        try:
            daemon.ensure_image(self.config.runner.image)
            clean_orphans(self.config, self.slots, daemon, self.registrar)
        except DockerFailure as error:  # the daemon went away just after answering
            raise GateError(f"docker_url {self.config.docker_url}: {error}",
                            kind=ErrorKind.DOCKER) from None
        finally:
            daemon.close()
        self.config.work_root.mkdir(parents=True, exist_ok=True)
        hook.install(self.config.work_root / "hooks")
        for folders in self.folders.values():
            folders.create()
            # What a killed service's last jobs wrote (their containers went with the orphans).
            wipe(folders.work)
            wipe(folders.status)
        policies = [(SlotPolicy(gpu_uuid=slot.uuid,
                                work_folder=self.folders[slot.index].work.resolve(),
                                allowed_capabilities=self.config.allowed_capabilities,
                                reserved_names=self.reserved_names),
                     self.folders[slot.index].proxy_socket) for slot in self.slots]
        # /metrics before the proxies: a port in use stops the start-up with nothing running.
        self.server = None
        if self.config.metrics_listen is not None:
            self.server = serve_metrics(self.config.metrics_listen, self.registry)
            host = self.config.metrics_listen.rsplit(":", 1)[0]
            emit(f"metrics on http://{host}:{self.server.port}/metrics")
        self.proxies = Proxies(policies, upstream)
        self.proxies.start()

    def run(self) -> int:
        """Serve until a signal drains every slot; 0."""
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        threads = [self._slot_thread(slot) for slot in self.slots]
        emit(f"serving {len(self.slots)} slot(s) for {self.config.github.target.describe()}")
        try:
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(JOIN_SECONDS)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.proxies.stop()
            if self.server is not None:
                self.server.close()
        emit("drained: every slot stopped")
        return 0

    def _slot_thread(self, slot: Slot) -> threading.Thread:
        cycle = SlotCycle(slot, self.config, self.folders[slot.index], self.registrar,
                          self.metrics, self.drain, emit)
        self.metrics.set_state(slot, SlotState.REGISTERING)
        thread = threading.Thread(target=self._guarded, args=(cycle,), name=f"slot{slot.index}")
        thread.start()
        return thread

    def _guarded(self, cycle: SlotCycle) -> None:
        """A bug in one slot's cycle stops that slot with a line, never the others."""
        try:
            cycle.run()
        except Exception as error:
            cycle.say(f"stopped by an internal error: {type(error).__name__}: {one_line(error)}")

    def _on_signal(self, number: int, _frame: FrameType | None) -> None:
        if not self.drain.is_set():
            emit(f"{signal.Signals(number).name}: draining (no new registrations; busy jobs get"
                 f" {self.config.drain_timeout:g} s)")
        self.drain.set()


def serve(config: RunnerConfig, slots: list[Slot]) -> int:
    """The service, from start-up to the end of the drain."""
    logging.basicConfig(format=f"{LOG_PREFIX}%(message)s", level=logging.INFO,
                        stream=sys.stderr)
    service = Service(config, slots)
    service.start_up()
    return service.run()
