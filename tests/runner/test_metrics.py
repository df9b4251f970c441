"""The runner service's /metrics: scraped over real HTTP and read with Prometheus' text parser."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import prometheus_client
import pytest
import requests
from helpers.runner_files import SLOT_UUIDS, token_file, write_config
from prometheus_client.parser import text_string_to_metric_families

from repro_gate import __version__
from repro_gate.errors import ConfigError
from repro_gate.runner.metrics import (
    DURATION_BUCKETS,
    JobOutcome,
    MetricsServer,
    RegistrationFailure,
    ServiceMetrics,
    SlotState,
    serve_metrics,
)
from repro_gate.runner.registration import runner_name
from repro_gate.runner.runner_config import load_runner_config
from repro_gate.runner.slots import Slot

POOL = "lab-a"
H100 = "nvidia-h100-80gb-hbm3"
A100 = "nvidia-a100-sxm4-40gb"
SLOTS = [Slot(0, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3"),
         Slot(1, SLOT_UUIDS[1], "NVIDIA H100 80GB HBM3"),
         Slot(2, "MIG-0c2d3e4f-5a6b-4b7e-9a61-5e1c2a4b8d3f", "NVIDIA A100-SXM4-40GB")]
# Every label a runner series may carry: anything else (a runner, job or slot) is unbounded.
BOUNDED_LABELS = {"pool", "gpu_model", "state", "outcome", "kind", "le", "version"}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def served() -> Iterator[tuple[ServiceMetrics, MetricsServer]]:
    metrics = ServiceMetrics(POOL)
    server = serve_metrics("127.0.0.1:0", metrics.registry)
    yield metrics, server
    server.close()


def scrape(server: MetricsServer) -> tuple[str, Samples]:
    """The endpoint's text and its samples, keyed by name and label set."""
    answer = requests.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }
    return answer.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset({"pool": POOL, **labels}.items()))]


def states(samples: Samples, model: str) -> dict[str, float]:
    return {state.value: value(samples, "repro_gate_runner_slots", gpu_model=model,
                               state=state.value) for state in SlotState}


def run_cycles(metrics: ServiceMetrics) -> None:
    """Two H100 slots and a MIG slot through registrations, jobs and faults."""
    h100, h100b, mig = SLOTS
    for slot in SLOTS:
        metrics.set_state(slot, SlotState.REGISTERING)
    metrics.registration_failed(h100b, RegistrationFailure.MALFORMED)
    metrics.set_state(h100, SlotState.IDLE)
    metrics.set_state(mig, SlotState.IDLE)
    metrics.job_started(h100)
    metrics.set_state(h100, SlotState.BUSY)
    metrics.job_finished(h100, JobOutcome.COMPLETED, 45.0)
    metrics.job_started(h100)
    metrics.job_finished(h100, JobOutcome.COMPLETED, 4000.0)
    metrics.job_started(mig)
    metrics.health_refused(mig)
    metrics.job_finished(mig, JobOutcome.REFUSED, 1.5)
    metrics.runner_crashed(h100b)
    metrics.set_state(h100b, SlotState.UNHEALTHY)
    metrics.set_state(mig, SlotState.CLEANING)


def test_values_after_job_cycles(served: tuple[ServiceMetrics, MetricsServer]) -> None:
    metrics, server = served
    run_cycles(metrics)
    _, samples = scrape(server)
    # Every state has a series, 0 when no slot is in it.
    assert states(samples, H100) == {"registering": 0, "idle": 0, "busy": 1, "cleaning": 0,
                                     "unhealthy": 1, "stopped": 0}
    assert states(samples, A100) == {"registering": 0, "idle": 0, "busy": 0, "cleaning": 1,
                                     "unhealthy": 0, "stopped": 0}
    assert value(samples, "repro_gate_runner_jobs_started_total", gpu_model=H100) == 2
    assert value(samples, "repro_gate_runner_jobs_started_total", gpu_model=A100) == 1
    finished = {outcome.value: value(samples, "repro_gate_runner_jobs_finished_total",
                                     gpu_model=H100, outcome=outcome.value)
                for outcome in JobOutcome}
    assert finished == {"completed": 2, "refused": 0, "crashed": 0, "cancelled": 0}
    assert value(samples, "repro_gate_runner_jobs_finished_total", gpu_model=A100,
                 outcome="refused") == 1
    for name, model, expected in [("registration_failures", H100, 1),
                                  ("registration_failures", A100, 0),
                                  ("health_refusals", A100, 1), ("health_refusals", H100, 0),
                                  ("runner_crashes", H100, 1), ("runner_crashes", A100, 0)]:
        assert value(samples, f"repro_gate_runner_{name}_total", gpu_model=model) == expected
    kinds = {kind.value: value(samples, "repro_gate_runner_registration_failure_kinds_total",
                               gpu_model=H100, kind=kind.value) for kind in RegistrationFailure}
    assert kinds == {"refused": 0, "no_answer": 0, "malformed": 1, "config": 0, "internal": 0}


def test_duration_histogram_spans_ci_jobs(served: tuple[ServiceMetrics, MetricsServer]) -> None:
    metrics, server = served
    run_cycles(metrics)
    _, samples = scrape(server)
    name = "repro_gate_runner_job_duration_seconds"
    assert value(samples, f"{name}_count", gpu_model=H100) == 2
    assert value(samples, f"{name}_sum", gpu_model=H100) == 4045.0
    buckets = {bound: value(samples, f"{name}_bucket", gpu_model=H100, le=f"{bound:.1f}")
               for bound in DURATION_BUCKETS}
    assert min(buckets) == 30 and max(buckets) == 6 * 3600
    assert buckets[30] == 0 and buckets[60] == 1 and buckets[3600] == 1 and buckets[7200] == 2
    assert value(samples, f"{name}_bucket", gpu_model=A100, le="30.0") == 1  # the refusal


def test_info_start_time_and_process(served: tuple[ServiceMetrics, MetricsServer]) -> None:
    _, server = served
    _, samples = scrape(server)
    assert value(samples, "repro_gate_runner_info", version=__version__) == 1
    assert value(samples, "repro_gate_runner_start_time_seconds") > 1.7e9
    assert samples[("process_open_fds", frozenset())] > 0


def test_label_sets_stay_bounded(served: tuple[ServiceMetrics, MetricsServer]) -> None:
    metrics, server = served
    run_cycles(metrics)
    before, samples = scrape(server)
    for _ in range(50):  # many more jobs: more counts, never more series
        run_cycles(metrics)
    text, after = scrape(server)
    assert set(after) == set(samples)
    assert {label for _, labels in after for label, _ in labels} <= BOUNDED_LABELS
    for slot in SLOTS:
        assert slot.uuid not in text
        assert runner_name("repro-gate", "gpuhost", slot) not in text
    assert "slot" not in {label for _, labels in after for label, _ in labels}
    assert len(before.splitlines()) == len(text.splitlines())


def test_threads_count_exactly(served: tuple[ServiceMetrics, MetricsServer]) -> None:
    metrics, server = served
    rounds = 300

    def cycle(slot: Slot) -> None:
        for _ in range(rounds):
            metrics.set_state(slot, SlotState.REGISTERING)
            metrics.set_state(slot, SlotState.BUSY)
            metrics.job_started(slot)
            metrics.job_finished(slot, JobOutcome.COMPLETED, 60.0)
            metrics.set_state(slot, SlotState.IDLE)

    threads = [threading.Thread(target=cycle, args=(slot,)) for slot in SLOTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _, samples = scrape(server)
    assert value(samples, "repro_gate_runner_jobs_started_total", gpu_model=H100) == 2 * rounds
    assert value(samples, "repro_gate_runner_jobs_finished_total", gpu_model=A100,
                 outcome="completed") == rounds
    assert states(samples, H100)["idle"] == 2 and sum(states(samples, H100).values()) == 2
    assert states(samples, A100)["idle"] == 1 and sum(states(samples, A100).values()) == 1


def test_own_registry_never_the_global_one() -> None:
    # Two services in one process (tests, the soak benchmark) must not collide.
    first, second = ServiceMetrics("a"), ServiceMetrics("b")
    first.job_started(SLOTS[0])
    assert first.registry is not second.registry
    assert first.registry.get_sample_value(
        "repro_gate_runner_jobs_started_total", {"pool": "a", "gpu_model": H100}) == 1
    assert prometheus_client.REGISTRY.get_sample_value(
        "repro_gate_runner_jobs_started_total", {"pool": "a", "gpu_model": H100}) is None


def test_port_in_use_is_one_config_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write_config(tmp_path, {"repository": "octo-org/trainer",
                                       "auth": {"token_file": token_file(tmp_path).name}},
                            metrics={"listen": f"127.0.0.1:{port}"})
        config = load_runner_config(path)
        assert config.metrics_listen is not None
        with pytest.raises(ConfigError) as raised:
            serve_metrics(config.metrics_listen, ServiceMetrics("x").registry)
    assert str(raised.value) == (
        f"metrics.listen: cannot serve /metrics on 127.0.0.1:{port}: the port is in use")
    assert raised.value.exit_code == 2


@pytest.mark.parametrize("listen", ["9466", "host:port", "127.0.0.1:70000",
                                    "no-such-host.invalid:9466"])
def test_bad_listen_is_one_config_line(listen: str) -> None:
    with pytest.raises(ConfigError, match=r"^metrics\.listen: ") as raised:
        serve_metrics(listen, ServiceMetrics("x").registry)
    assert "\n" not in str(raised.value)


def test_close_frees_the_port() -> None:
    metrics = ServiceMetrics(POOL)
    server = serve_metrics("127.0.0.1:0", metrics.registry)
    port = server.port
    server.close()
    assert not server.thread.is_alive()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    again = serve_metrics(f"127.0.0.1:{port}", metrics.registry)
    again.close()
