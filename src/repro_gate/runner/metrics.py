"""The runner service's Prometheus metrics, scraped from its own `/metrics` endpoint.

A registry of its own: the gate's Pushgateway families (`publish/metrics/`) are built per push
and never share a registry with these. Labels stay bounded: `pool` (runner.yml) and `gpu_model`
(the slug the runner's GitHub label uses), plus the `state`, `outcome` and `kind` enums; never a
runner name, slot UUID, job or run, which would grow a series per job.
"""

from __future__ import annotations

import errno
import socket
import threading
from dataclasses import dataclass
from enum import Enum
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import start_http_server
from prometheus_client.process_collector import ProcessCollector

from repro_gate import __version__
from repro_gate.errors import (
    ConfigError,
    GitHubAnswerError,
    GitHubError,
    ReproGateError,
    one_line,
)
from repro_gate.runner.registration import slug
from repro_gate.runner.slots import Slot

PREFIX = "repro_gate_runner"
LISTEN_KEY = "metrics.listen"
# CI jobs: from a quick refusal-free job (30 s) to GitHub's 6 h job limit.
DURATION_BUCKETS = (30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 10800, 14400, 21600)
CLOSE_WAIT_SECONDS = 5.0
MODEL_LABELS = ("pool", "gpu_model")


class SlotState(str, Enum):
    """Where a slot is in its job cycle."""

    REGISTERING = "registering"  # health check and JIT registration
    IDLE = "idle"  # runner container up, waiting for a job
    BUSY = "busy"  # a job started (the hook wrote its status)
    CLEANING = "cleaning"  # container removed, work folder wiped, GPU re-checked
    UNHEALTHY = "unhealthy"  # health check failed or the runner crash-looped
    STOPPED = "stopped"  # drained or shut down


class JobOutcome(str, Enum):
    """How a job's runner container ended."""

    COMPLETED = "completed"
    REFUSED = "refused"  # the job-started hook refused the job (GPU not visible or unhealthy)
    CRASHED = "crashed"
    CANCELLED = "cancelled"  # stopped by a drain past its timeout


class RegistrationFailure(str, Enum):
    """Why a slot's registration step (list, delete, register, App token) failed."""

    REFUSED = "refused"  # GitHub answered with an error status, after the client's retries
    NO_ANSWER = "no_answer"  # no answer: connection, timeout, the time budget used up
    MALFORMED = "malformed"  # an answer unlike the API's description, too large, a link off it
    CONFIG = "config"  # the service's own side: the token file, the App's key
    INTERNAL = "internal"  # an exception nobody expected: a bug, logged with its type

    @classmethod
    def of(cls, error: Exception) -> RegistrationFailure:
        if isinstance(error, GitHubAnswerError):
            return cls.MALFORMED
        if isinstance(error, GitHubError):
            return cls.NO_ANSWER if error.status is None else cls.REFUSED
        return cls.CONFIG if isinstance(error, ReproGateError) else cls.INTERNAL


class ServiceMetrics:
    """The service's metric families; every method is safe to call from any slot's thread."""

    def __init__(self, pool: str, registry: CollectorRegistry | None = None) -> None:
        self.pool = pool
        self.registry = CollectorRegistry() if registry is None else registry
        self._lock = threading.Lock()
        self._states: dict[str, tuple[str, SlotState]] = {}  # slot uuid -> (gpu_model, state)
        self._models: set[str] = set()
        self._define(self.registry)
        Info(PREFIX, "The runner service's version.", registry=self.registry).info(
            {"pool": pool, "version": __version__})
        Gauge(f"{PREFIX}_start_time_seconds", "When the runner service started (Unix time).",
              ["pool"], registry=self.registry).labels(pool).set_to_current_time()
        # Resident memory and open descriptors: the soak benchmark's and on-call's leak signal.
        ProcessCollector(registry=self.registry)

    def _define(self, registry: CollectorRegistry) -> None:
        self._slots = Gauge(f"{PREFIX}_slots", "Slots of the service by state.",
                            [*MODEL_LABELS, "state"], registry=registry)
        self._started = Counter(f"{PREFIX}_jobs_started", "Jobs a runner started (hook ran).",
                                MODEL_LABELS, registry=registry)
        self._finished = Counter(f"{PREFIX}_jobs_finished", "Jobs whose runner container ended.",
                                 [*MODEL_LABELS, "outcome"], registry=registry)
        self._duration = Histogram(f"{PREFIX}_job_duration_seconds",
                                   "Time from a job's start to its runner container's end.",
                                   MODEL_LABELS, registry=registry, buckets=DURATION_BUCKETS)
        self._registration_failures = Counter(
            f"{PREFIX}_registration_failures", "JIT registrations GitHub refused or never "
            "answered (after retries).", MODEL_LABELS, registry=registry)
        self._failure_kinds = Counter(
            f"{PREFIX}_registration_failure_kinds", "Registration failures by kind (refused,"
            " no_answer, malformed, config, internal).", [*MODEL_LABELS, "kind"],
            registry=registry)
        self._health_refusals = Counter(
            f"{PREFIX}_health_refusals", "Jobs the job-started hook refused (GPU not healthy).",
            MODEL_LABELS, registry=registry)
        self._crashes = Counter(f"{PREFIX}_runner_crashes", "Runner containers that exited "
                                "non-zero without running a job.", MODEL_LABELS,
                                registry=registry)

    def set_state(self, slot: Slot, state: SlotState) -> None:
        """Move `slot` to `state`; the gauge counts slots per state, 0 for the empty ones."""
        model = slug(slot.model)
        with self._lock:
            self._ensure(model)
            self._states[slot.uuid] = (model, state)
            counts = dict.fromkeys(SlotState, 0)
            for other_model, other_state in self._states.values():
                if other_model == model:
                    counts[other_state] += 1
            for each, count in counts.items():
                self._slots.labels(self.pool, model, each.value).set(count)

    def job_started(self, slot: Slot) -> None:
        self._count(self._started, slot)

    def job_finished(self, slot: Slot, outcome: JobOutcome, seconds: float) -> None:
        model = slug(slot.model)
        with self._lock:
            self._ensure(model)
            self._finished.labels(self.pool, model, outcome.value).inc()
            self._duration.labels(self.pool, model).observe(max(seconds, 0.0))

    def registration_failed(self, slot: Slot, kind: RegistrationFailure) -> None:
        model = slug(slot.model)
        with self._lock:
            self._ensure(model)
            self._registration_failures.labels(self.pool, model).inc()
            self._failure_kinds.labels(self.pool, model, kind.value).inc()

    def health_refused(self, slot: Slot) -> None:
        self._count(self._health_refusals, slot)

    def runner_crashed(self, slot: Slot) -> None:
        self._count(self._crashes, slot)

    def _count(self, counter: Counter, slot: Slot) -> None:
        model = slug(slot.model)
        with self._lock:
            self._ensure(model)
            counter.labels(self.pool, model).inc()

    def _ensure(self, model: str) -> None:
        """Create a GPU model's series at 0 the first time it shows up (lock held): `increase()`
        cannot see a counter's first increment when the series is born with it."""
        if model in self._models:
            return
        self._models.add(model)
        for state in SlotState:
            self._slots.labels(self.pool, model, state.value).set(0)
        for outcome in JobOutcome:
            self._finished.labels(self.pool, model, outcome.value)
        for kind in RegistrationFailure:
            self._failure_kinds.labels(self.pool, model, kind.value)
        for family in (self._started, self._duration, self._registration_failures,
                       self._health_refusals, self._crashes):
            family.labels(self.pool, model)


@dataclass(frozen=True)
class MetricsServer:
    """The /metrics endpoint, served from a daemon thread."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(CLOSE_WAIT_SECONDS)


def serve_metrics(listen: str, registry: CollectorRegistry) -> MetricsServer:
    """Serve `registry` on `listen` ("HOST:PORT"; port 0 picks a free one)."""
    host, port = parse_listen(listen)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        # A port in use is a deployment mistake (two services, or another exporter on it).
        why = "the port is in use" if error.errno == errno.EADDRINUSE else one_line(error)
        raise ConfigError(f"{LISTEN_KEY}: cannot serve /metrics on {listen}: {why}") from None
    return MetricsServer(server, thread)


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::]:PORT` for IPv6; an empty host means every IPv4 address)."""
    host, sep, port_text = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "0.0.0.0"
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"{LISTEN_KEY}: {listen!r} is not HOST:PORT")
    try:
        socket.getaddrinfo(host, None)
    except socket.gaierror as error:
        raise ConfigError(f"{LISTEN_KEY}: {listen!r}: unknown host ({one_line(error)})") from None
    return host, int(port_text)
