"""NVML parsing and the join with torch's device list, on raw values as pynvml returns them."""

from __future__ import annotations

from repro_gate.fingerprint.nvml import cuda_version, join_gpus, parse_nvml, read_nvml

H100_UUID_0 = "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b"
H100_UUID_1 = "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"

# Values in the shapes pynvml returns them: str (or bytes from old bindings), int, tuples, and
# NVMLError texts where a query is not supported (as `read_nvml` records them).
RAW_TWO_H100 = {
    "driver_version": "550.54.15",
    "cuda_driver_version": 12040,
    "devices": [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": H100_UUID_1,
            "pci_bus_id": "00000000:19:00.0",
            "memory_total": 85520809984,
            "compute_capability": (9, 0),
            "mig_mode": [0, 0],
            "ecc_mode": [1, 1],
        },
        {
            "index": 1,
            "name": b"NVIDIA H100 80GB HBM3",
            "uuid": H100_UUID_0.encode(),
            "pci_bus_id": "00000000:3B:00.0",
            "memory_total": 85520809984,
            "compute_capability": (9, 0),
            "mig_mode": [0, 1],
            "ecc_mode": [1, 1],
        },
    ],
}

RAW_A10G = {
    "driver_version": "535.183.01",
    "cuda_driver_version": 12020,
    "devices": [
        {
            "index": 0,
            "name": "NVIDIA A10G",
            "uuid": "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
            "pci_bus_id": "00000000:00:1E.0",
            "memory_total": 24146608128,
            "compute_capability": (8, 6),
            "mig_mode": {"error": "Not Supported"},
            "ecc_mode": [0, 0],
        }
    ],
}


def test_parse_two_h100() -> None:
    parsed = parse_nvml(RAW_TWO_H100)
    assert parsed["driver_version"] == "550.54.15"
    assert parsed["cuda_driver_version"] == "12.4"
    first, second = parsed["devices"]
    assert first == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": H100_UUID_1,
        "pci_bus_id": "00000000:19:00.0",
        "memory_mib": 81559,
        "compute_capability": "9.0",
        "mig_mode": "disabled",
        "ecc_mode": "enabled",
    }
    assert second["name"] == "NVIDIA H100 80GB HBM3"  # bytes from old bindings decoded
    assert second["uuid"] == H100_UUID_0
    assert second["mig_mode"] == "disabled (pending enabled)"


def test_parse_unsupported_mig_and_disabled_ecc() -> None:
    device = parse_nvml(RAW_A10G)["devices"][0]
    assert device["mig_mode"] == "not supported"
    assert device["ecc_mode"] == "disabled"
    assert device["compute_capability"] == "8.6"
    assert parse_nvml(RAW_A10G)["cuda_driver_version"] == "12.2"


def test_parse_without_nvml_gives_the_reason() -> None:
    parsed = parse_nvml({"error": "NVML is not available: NVML Shared Library Not Found"})
    assert parsed == {
        "driver_version": None,
        "cuda_driver_version": None,
        "devices": [],
        "reason": "NVML is not available: NVML Shared Library Not Found",
    }


def test_join_on_uuid_not_on_index() -> None:
    nvml = parse_nvml(RAW_TWO_H100)["devices"]
    # CUDA ordinal 0 is NVML index 1 (CUDA_VISIBLE_DEVICES=1,0): torch reports bare UUIDs.
    torch_devices = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": H100_UUID_0.removeprefix("GPU-"),
         "compute_capability": "9.0", "total_memory": 85520809984,
         "multi_processor_count": 132},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": H100_UUID_1.removeprefix("GPU-"),
         "compute_capability": "9.0", "total_memory": 85520809984,
         "multi_processor_count": 132},
    ]
    joined = join_gpus(nvml, torch_devices)
    assert [(g["index"], g["nvml_index"], g["pci_bus_id"]) for g in joined] == [
        (0, 1, "00000000:3B:00.0"),
        (1, 0, "00000000:19:00.0"),
    ]
    assert joined[0]["uuid"] == H100_UUID_0
    assert joined[0]["mig_mode"] == "disabled (pending enabled)"
    assert joined[1]["multi_processor_count"] == 132
    assert {g["source"] for g in joined} == {"nvml+torch"}


def test_join_keeps_torch_facts_for_an_unknown_uuid_and_nvml_alone_without_torch() -> None:
    nvml = parse_nvml(RAW_A10G)["devices"]
    stranger = {"index": 0, "name": "NVIDIA L4", "uuid": "9d8c7b6a-0000-1111-2222-333344445555",
                "compute_capability": "8.9", "total_memory": 23580639232,
                "multi_processor_count": 58}
    joined = join_gpus(nvml, [stranger])
    assert joined == [{"index": 0, "name": "NVIDIA L4", "uuid": stranger["uuid"],
                       "compute_capability": "8.9", "memory_mib": 22488,
                       "multi_processor_count": 58, "source": "torch"}]
    alone = join_gpus(nvml, [])
    assert alone[0]["source"] == "nvml"
    assert alone[0]["name"] == "NVIDIA A10G"


def test_cuda_version_text() -> None:
    assert cuda_version(12080) == "12.8"
    assert cuda_version(11040) == "11.4"
    assert cuda_version({"error": "Uninitialized"}) is None


def test_reader_on_this_machine_returns_devices_or_a_reason() -> None:
    raw = read_nvml()
    parsed = parse_nvml(raw)
    if parsed["devices"]:
        assert parsed["driver_version"]
        assert all(d["uuid"] and d["uuid"].startswith(("GPU-", "MIG-")) for d in parsed["devices"])
    else:
        assert parsed["reason"].startswith(("NVML", "nvidia-ml-py", "cannot count GPUs"))
