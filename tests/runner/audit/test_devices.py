"""The audit's device attempts through the real proxy: a privileged container and GPUs the slot
must not get are refused by the filter, and the other GPU's device node is found from the
NVIDIA driver's /proc files (or the attempt is not run where there is none)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from repro_gate.runner.audit import devices
from repro_gate.runner.audit.engine import Blocked, Finding, Outcome
from repro_gate.runner.audit.steps import Context

OTHER = "GPU-99999999-8888-7777-6666-555555555555"


@pytest.mark.parametrize(("attempt", "refusal"), [
    (devices.privileged, "Privileged is refused"),
    (devices.other_gpu_by_uuid, f"DeviceRequests: DeviceIDs ['{OTHER}'] is refused"),
    (devices.all_gpus, "DeviceRequests: DeviceIDs ['all'] is refused"),
    (devices.gpu_count_all, "DeviceRequests: Count -1 is refused"),
])
def test_the_filter_refuses_each_device_attempt_before_any_container_exists(
    attempt: Callable[[Context], Finding], refusal: str, audit: Context
) -> None:
    with pytest.raises(Blocked) as blocked:
        attempt(audit)

    assert blocked.value.finding.outcome is Outcome.REFUSED_BY_FILTER
    assert f"create: 403 repro-gate docker proxy: {refusal}" in blocked.value.finding.detail
    assert audit.engine.containers == []


def driver_files(folder: Path) -> Path:
    """/proc/driver/nvidia/gpus as the driver writes it for two GPUs."""
    for bus, uuid, minor in (("0000:17:00.0", "GPU-11111111-2222-3333-4444-555555555555", 0),
                             ("0000:65:00.0", OTHER, 3)):
        (folder / bus).mkdir(parents=True)
        (folder / bus / "information").write_text(
            f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\n"
            f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDevice Minor: \t {minor}\n")
    return folder


def test_the_other_gpus_device_node_is_read_from_the_drivers_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devices, "NVIDIA_PROC", driver_files(tmp_path / "gpus"))

    assert devices.device_node(OTHER) == Path("/dev/nvidia3")
    assert devices.device_node("GPU-00000000-0000-0000-0000-000000000000") is None


def test_the_other_gpus_node_is_refused_by_the_filter(
    audit: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devices, "NVIDIA_PROC", driver_files(tmp_path / "gpus"))

    with pytest.raises(Blocked) as blocked:
        devices.other_gpu_device(audit)

    assert "HostConfig.Devices is refused" in blocked.value.finding.detail


def test_without_the_other_gpus_node_the_attempt_is_not_run(
    audit: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devices, "NVIDIA_PROC", tmp_path / "no-driver")

    finding = devices.other_gpu_device(audit)

    assert finding == Finding(Outcome.NOT_RUN,
                              "no NVIDIA device node of the other GPU on this host")
