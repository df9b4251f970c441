"""The service's slots from raw NVML values, as `read_devices` records them on real machines:
whole GPUs, MIG instances, or the UUIDs the file lists, and the refusals when none is found."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.errors import ConfigError
from repro_gate.runner.runner_config import DEFAULT_GPU_MODEL, SlotSettings, SlotSource
from repro_gate.runner.slots import Slot, slots_from_raw

H100 = "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b"
A100 = "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"
MIG_A = "MIG-11111111-2222-4333-8444-555555555555"
MIG_B = "MIG-66666666-7777-4888-9999-000000000000"
NOT_SUPPORTED = {"error": "Not Supported"}


def device(index: int, uuid: Any, name: Any, mig_mode: Any = NOT_SUPPORTED,
           migs: Any = NOT_SUPPORTED) -> dict[str, Any]:
    return {"index": index, "name": name, "uuid": uuid, "minor": index, "mig_mode": mig_mode,
            "mig_devices": migs}


HOST = {"devices": [
    device(0, H100.encode(), b"NVIDIA H100 80GB HBM3"),  # older nvidia-ml-py: bytes
    device(1, A100, "NVIDIA A100-SXM4-40GB", mig_mode=[1, 1], migs=[
        {"name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": MIG_A},
        {"name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": MIG_B}]),
]}


def test_one_slot_per_gpu_by_default_even_in_mig_mode() -> None:
    assert slots_from_raw(HOST, SlotSettings()) == [
        Slot(0, H100, "NVIDIA H100 80GB HBM3"), Slot(1, A100, "NVIDIA A100-SXM4-40GB")]


def test_mig_source_gives_each_instance_a_slot_with_its_parent() -> None:
    assert slots_from_raw(HOST, SlotSettings(SlotSource.MIG)) == [
        Slot(0, H100, "NVIDIA H100 80GB HBM3"),
        Slot(1, MIG_A, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100),
        Slot(2, MIG_B, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100)]


def test_a_gpu_nvml_cannot_name_is_skipped_and_a_nameless_one_gets_the_default_model() -> None:
    raw = {"devices": [device(0, NOT_SUPPORTED, "NVIDIA H100"), device(1, A100, NOT_SUPPORTED)]}

    assert slots_from_raw(raw, SlotSettings()) == [Slot(0, A100, DEFAULT_GPU_MODEL)]


@pytest.mark.parametrize(("raw", "message"), [
    ({"error": "NVML is not available: libnvidia-ml.so.1 not found"},
     "slots: cannot discover GPUs: NVML is not available: libnvidia-ml.so.1 not found (list"
     " them by UUID with slots.source: uuids, or fix the driver)"),
    ({"devices": []}, "slots: NVML lists no GPU with a UUID on this machine"),
])
def test_no_gpu_to_discover_is_one_line(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        slots_from_raw(raw, SlotSettings())

    assert str(refused.value) == message


def test_listed_uuids_keep_the_files_order_and_take_their_model_from_nvml() -> None:
    settings = SlotSettings(SlotSource.UUIDS, (MIG_B.lower(), "GPU-0a1b2c3d", H100[4:]),
                            model="NVIDIA L4")

    assert slots_from_raw(HOST, settings) == [
        Slot(0, MIG_B.lower(), "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100),
        Slot(1, "GPU-0a1b2c3d", "NVIDIA L4"),
        Slot(2, H100[4:], "NVIDIA H100 80GB HBM3")]


def test_listed_uuids_need_no_nvml() -> None:
    settings = SlotSettings(SlotSource.UUIDS, (H100,))

    assert slots_from_raw({"error": "no driver"}, settings) == [Slot(0, H100, DEFAULT_GPU_MODEL)]
