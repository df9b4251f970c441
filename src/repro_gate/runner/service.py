"""`repro-gate runner serve`: start-up, one job cycle per slot, drain on SIGTERM/SIGINT.

Start-up, in this order (each failure is one line and exit 2, and what was started is stopped):
the configuration and slots -> (shared engine: the daemon answers, the runner image is there,
orphan containers removed, all before anything is made) -> /metrics -> the job-started hook
installed -> per slot, its endpoint (slot_endpoint.py: the slot's rootless engine under its own
user and the filter in front of it), the runner image present or pulled on that engine, then
the slot reset (slot_reset.py: whatever a killed service's jobs left, gone) -> the service's
orphan registrations deleted -> one thread per slot running `SlotCycle`.

A signal sets the drain: no new registrations, idle runners deregistered and removed, busy jobs
given `drain_timeout`; the service exits 0 when every slot has stopped.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
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
from repro_gate.runner.registration import Registrar, runner_name_stem
from repro_gate.runner.runner_config import EngineKind, RunnerConfig
from repro_gate.runner.slot_cycle import JIT_VARIABLE, SlotCycle
from repro_gate.runner.slot_endpoint import SlotEndpoint, unix_socket
from repro_gate.runner.slot_folders import wipe
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


def check_environment(config: RunnerConfig, slots: list[Slot]) -> None:
    """runner.environment may not set what the service sets itself."""
    own = {JIT_VARIABLE}
    for slot in slots:
        own |= set(hook.runner_environment(slot, allow_no_gpu=True))
    for key, _ in config.runner.environment:
        if key in own:
            raise ConfigError(f"{config.config_file}: runner.environment.{key}: is set by the"
                              " service itself")


def remove_orphan_containers(daemon: Daemon, labels: list[str]) -> None:
    """What a killed service left on an engine: its containers."""
    for label in labels:
        for name in daemon.remove_labelled(label):
            emit(f"orphan container removed: {name}")


def delete_orphan_registrations(config: RunnerConfig, registrar: Registrar) -> None:
    """The service's runners GitHub lists as offline or not busy."""
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


def prepare_engine(config: RunnerConfig, url: str, labels: list[str]) -> None:
    """The runner image on the engine at `url`, and the orphans of a killed service gone."""
    daemon = connect(url)
    try:
        daemon.ensure_image(config.runner.image)
        remove_orphan_containers(daemon, labels)
    except DockerFailure as error:  # the daemon went away just after answering
        raise GateError(f"docker engine {url}: {error}", kind=ErrorKind.DOCKER) from None
    finally:
        daemon.close()


class Service:
    """The running service: its slot endpoints, metrics endpoint and slot threads."""

    server: MetricsServer | None
    registrar: Registrar

    def __init__(self, config: RunnerConfig, slots: list[Slot]) -> None:
        self.config = config
        self.slots = slots
        self.drain = threading.Event()
        self.registry = CollectorRegistry()
        self.metrics = ServiceMetrics(config.pool, self.registry)
        self.endpoints: dict[int, SlotEndpoint] = {}

    def start_up(self) -> None:
        """Every check and clean-up before a slot runs; GateError/ConfigError stop it here,
        with whatever was started stopped again."""
        check_environment(self.config, self.slots)
        self.registrar = Registrar(self.config)
        service = f"{SERVICE_LABEL}={service_label(self.config.name_prefix, self.config.host)}"
        shared = self.config.isolation.engine is EngineKind.SHARED
        if shared:  # one daemon for every slot: checked before anything is made
            unix_socket(self.config.docker_url)
            prepare_engine(self.config, self.config.docker_url, [
                service, *(f"{SLOT_LABEL}={slot.uuid}" for slot in self.slots)])
        # /metrics before the endpoints: a port in use stops the start-up with nothing running.
        self.server = None
        if self.config.metrics_listen is not None:
            self.server = serve_metrics(self.config.metrics_listen, self.registry)
            host = self.config.metrics_listen.rsplit(":", 1)[0]
            emit(f"metrics on http://{host}:{self.server.port}/metrics")
        try:
            self.config.work_root.mkdir(parents=True, exist_ok=True)
            hook.install(self.config.work_root / "hooks")
            for slot in self.slots:
                self._start_endpoint(slot, None if shared else [service])
        except BaseException:
            self._stop_endpoints()
            if self.server is not None:
                self.server.close()
            raise
        delete_orphan_registrations(self.config, self.registrar)

    def _start_endpoint(self, slot: Slot, labels: list[str] | None) -> None:
        """The slot's engine and filter; on its own engine, the image, then the reset."""
        endpoint = SlotEndpoint(self.config, slot, lambda line: emit(f"slot {slot.index}: {line}"))
        self.endpoints[slot.index] = endpoint
        endpoint.start()
        emit(f"slot {slot.index}: jobs get {endpoint.socket} (engine {endpoint.engine_url})")
        if labels is None:
            # What a killed service's last jobs wrote (their containers went with the orphans).
            wipe(endpoint.folders.work)
            wipe(endpoint.folders.status)
            return
        prepare_engine(self.config, endpoint.engine_url, labels)
        report = endpoint.reset()
        if not report.fresh:
            raise GateError(f"slot {slot.index}: survived the reset at start:"
                            f" {', '.join(report.survivors)}", kind=ErrorKind.DOCKER)
        emit(f"slot {slot.index}: reset: the engine is fresh ({report.seconds:.1f} s)")

    def _stop_endpoints(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.stop()

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
            self._stop_endpoints()
            if self.server is not None:
                self.server.close()
        emit("drained: every slot stopped")
        return 0

    def _slot_thread(self, slot: Slot) -> threading.Thread:
        endpoint = self.endpoints[slot.index]
        cycle = SlotCycle(slot, self.config, endpoint.folders, endpoint.engine_url,
                          self.registrar, self.metrics, self.drain, emit,
                          endpoint.reset if endpoint.engine is not None else None)
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
