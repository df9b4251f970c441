"""The service's GPU health check on the host: raw NVML values in the form pynvml returns them
(bytes UUIDs from older nvidia-ml-py, "Not Supported" where a GPU lacks a query), judged with
the hook's rules, plus the compute processes a job left on the slot's GPU and the wait for them.

This machine has no NVIDIA driver, so `check_slot` meets NVML absent here: those tests are
skipped where NVML answers, and `test_on_this_gpu` runs instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.runner_files import SLOT_UUIDS

from repro_gate.runner.health import (
    HealthReport,
    check_slot,
    health_from_raw,
    read_health,
    wait_for_health,
)
from repro_gate.runner.runner_config import HealthSettings
from repro_gate.runner.slots import Slot

MIG = "MIG-11111111-2222-4333-8444-555555555555"
SLOT = Slot(0, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3")
MIG_SLOT = Slot(1, MIG, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", SLOT_UUIDS[1])
NOT_SUPPORTED = {"error": "Not Supported"}
# An H100 as `read_health` reads it: no MIG, nothing wrong.
H100 = {"uuid": SLOT_UUIDS[0].encode(), "mig_uuids": [], "ecc_uncorrected_volatile": 0,
        "retired_pages_pending": 0, "remapped_rows": (0, 0, 0, 0), "temperature": 38,
        "slowdown_temperature": 87}
# An A100 in MIG mode with one instance (the slot), and a consumer GPU without ECC or remaps.
A100_MIG = {**H100, "uuid": SLOT_UUIDS[1], "mig_uuids": [MIG], "temperature": 45,
            "slowdown_temperature": 90}
RTX = {"uuid": "GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "mig_uuids": [],
       "ecc_uncorrected_volatile": NOT_SUPPORTED, "retired_pages_pending": NOT_SUPPORTED,
       "remapped_rows": NOT_SUPPORTED, "temperature": 52, "slowdown_temperature": 95}
HEALTHY = HealthReport(True, None, True)
NVML_ANSWERS = "absent" not in read_health(SLOT)
needs_no_nvml = pytest.mark.skipif(NVML_ANSWERS, reason="NVML answers here: see test_on_this_gpu")


def host(*devices: dict[str, Any], processes: Any = ()) -> dict[str, Any]:
    return {"devices": list(devices), "processes": list(processes)
            if isinstance(processes, tuple) else processes}


@pytest.mark.parametrize(("slot", "raw"), [
    (SLOT, host(H100, A100_MIG)),
    (MIG_SLOT, host(H100, A100_MIG)),
    (Slot(2, RTX["uuid"].upper(), "rtx"), host(RTX, processes=NOT_SUPPORTED)),
])
def test_a_healthy_gpu(slot: Slot, raw: dict[str, Any]) -> None:
    assert health_from_raw(raw, slot) == HEALTHY


@pytest.mark.parametrize(("change", "problem"), [
    ({"ecc_uncorrected_volatile": 3}, "has 3 uncorrectable ECC errors since the driver loaded"),
    ({"retired_pages_pending": 1}, "has retired pages pending (reset the GPU)"),
    ({"remapped_rows": (0, 2, 1, 0)}, "has a row remap pending (reset the GPU)"),
    ({"remapped_rows": (0, 2, 0, 1)}, "has a row remap failed (reset the GPU)"),
    ({"temperature": 87}, "is at 87 C, at or over its slowdown threshold 87 C"),
])
def test_an_unhealthy_gpu_is_judged_by_the_hook_rules(change: dict[str, Any], problem: str
                                                      ) -> None:
    report = health_from_raw(host({**H100, **change}, processes=(4242,)), SLOT)
    assert report == HealthReport(False, f"GPU {SLOT.uuid} {problem}", True)


def test_a_mig_slot_is_judged_by_its_gpu() -> None:
    report = health_from_raw(host(H100, {**A100_MIG, "retired_pages_pending": 1}), MIG_SLOT)
    assert report.reason == f"GPU {MIG} has retired pages pending (reset the GPU)"


def test_an_invisible_gpu() -> None:
    report = health_from_raw(host(H100, RTX), MIG_SLOT)
    assert report == HealthReport(False, f"GPU {MIG} is not visible to NVML on this host"
                                         f" (visible: {SLOT_UUIDS[0]}, {RTX['uuid']})", True)
    assert health_from_raw(host(), SLOT).reason == (
        f"GPU {SLOT.uuid} is not visible to NVML on this host (visible: none)")


def test_leftover_processes_are_named() -> None:
    report = health_from_raw(host(H100, processes=(4242, 4343)), SLOT)
    assert report == HealthReport(
        False, f"GPU {SLOT.uuid} still runs compute processes (PID 4242, 4343)", True,
        (4242, 4343))


def readings(*raws: dict[str, Any]) -> tuple[Callable[[], dict[str, Any]], list[float]]:
    """A reader giving `raws` in turn (the last one again and again), and when it was read."""
    times: list[float] = []
    values: Iterator[dict[str, Any]] = iter(raws)

    def read() -> dict[str, Any]:
        times.append(time.monotonic())
        return next(values, raws[-1])
    return read, times


def test_processes_that_leave_during_the_wait() -> None:
    read, times = readings(host(H100, processes=(4242,)), host(H100, processes=(4242,)),
                           host(H100))
    assert wait_for_health(read, SLOT, 30.0, poll_seconds=0.01) == HEALTHY
    assert len(times) == 3 and times[-1] - times[0] < 5


def test_processes_that_stay() -> None:
    read, times = readings(host(H100, processes=(4242,)))
    report = wait_for_health(read, SLOT, 0.2, poll_seconds=0.05)
    assert report == HealthReport(
        False, f"GPU {SLOT.uuid} still runs compute processes (PID 4242) after waiting 0.2 s",
        True, (4242,))
    assert 0.2 <= times[-1] - times[0] < 2 and len(times) >= 3


def test_no_wait_for_processes_on_a_broken_gpu() -> None:
    read, times = readings(host({**H100, "ecc_uncorrected_volatile": 1}, processes=(4242,)))
    assert not wait_for_health(read, SLOT, 30.0).healthy
    assert len(times) == 1


def test_nvml_absent_or_failing_in_the_raw_values() -> None:
    assert health_from_raw({"absent": "NVML is not available: Driver Not Loaded"}, SLOT) == (
        HealthReport(False, f"GPU {SLOT.uuid} cannot be checked: NVML is not available:"
                            " Driver Not Loaded", False))
    failed = health_from_raw({"error": "NVML query failed: GPU is lost"}, SLOT)
    assert failed == HealthReport(
        False, f"GPU {SLOT.uuid} cannot be checked: NVML query failed: GPU is lost", True)


@needs_no_nvml
def test_nvml_absent_is_unhealthy_unless_allowed() -> None:
    refused = check_slot(SLOT, HealthSettings(), wait_for_processes=True)
    assert not refused.healthy and not refused.checked
    assert refused.reason is not None
    assert refused.reason.startswith(f"GPU {SLOT.uuid} cannot be checked: ")
    allowed = check_slot(SLOT, HealthSettings(allow_no_gpu=True), wait_for_processes=True)
    assert allowed == HealthReport(True, f"{refused.reason}; health.allow_no_gpu is set, so the"
                                         " slot is offered unchecked", False)


@pytest.mark.skipif(not NVML_ANSWERS, reason="needs a GPU whose driver NVML reaches")
def test_on_this_gpu() -> None:
    raw = read_health(SLOT)
    uuid = raw["devices"][0]["uuid"]
    slot = Slot(0, uuid.decode() if isinstance(uuid, bytes) else uuid, "gpu")
    report = check_slot(slot, HealthSettings(), wait_for_processes=False)
    assert report.checked and (report.healthy or report.reason)
    assert "not visible" in str(check_slot(SLOT, HealthSettings(), wait_for_processes=False))
