"""GPUs through NVML (`nvidia-ml-py`, imported as `pynvml`), joined with torch's view on UUID.

`read_nvml()` is the thin reader: it only calls pynvml and keeps each raw value (or the error it
raised). `parse_nvml()` and `join_gpus()` turn those raw values into the fingerprint and are pure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from repro_gate.errors import one_line

# Raw value of one NVML call: the value, or {"error": "..."} when the call raised.
Raw = Any

MIG_MODES = {0: "disabled", 1: "enabled"}
ECC_MODES = {0: "disabled", 1: "enabled"}


class NvmlUnavailable(Exception):
    """NVML cannot be used on this machine; the text says why, in one line."""


@contextlib.contextmanager
def nvml_session() -> Iterator[Any]:
    """`pynvml`, initialised for the block and shut down after it; NvmlUnavailable when the
    package or the driver is missing."""
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)"
                              ) from None
    try:
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        raise NvmlUnavailable(f"NVML is not available: {one_line(error)}") from None
    try:
        yield pynvml
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def read_nvml() -> dict[str, Any]:
    """Raw NVML values of this machine, or {"error": reason} when NVML cannot be used."""
    try:
        with nvml_session() as pynvml:
            return _read_devices(pynvml)
    except NvmlUnavailable as error:
        return {"error": str(error)}


def _read_devices(pynvml: Any) -> dict[str, Any]:
    try:
        raw: dict[str, Any] = {
            "driver_version": nvml_call(pynvml.nvmlSystemGetDriverVersion),
            "cuda_driver_version": nvml_call(pynvml.nvmlSystemGetCudaDriverVersion_v2),
            "devices": [],
        }
        count = nvml_call(pynvml.nvmlDeviceGetCount)
        if isinstance(count, dict):
            return {**raw, "error": f"cannot count GPUs: {count['error']}"}
        for index in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml_call(pynvml.nvmlDeviceGetMemoryInfo, handle)
            pci = nvml_call(pynvml.nvmlDeviceGetPciInfo, handle)
            raw["devices"].append(
                {
                    "index": index,
                    "name": nvml_call(pynvml.nvmlDeviceGetName, handle),
                    "uuid": nvml_call(pynvml.nvmlDeviceGetUUID, handle),
                    "pci_bus_id": pci if isinstance(pci, dict) else getattr(pci, "busId", None),
                    "memory_total": memory if isinstance(memory, dict) else memory.total,
                    "compute_capability": nvml_call(
                        pynvml.nvmlDeviceGetCudaComputeCapability, handle),
                    "mig_mode": nvml_call(pynvml.nvmlDeviceGetMigMode, handle),
                    "ecc_mode": nvml_call(pynvml.nvmlDeviceGetEccMode, handle),
                }
            )
        return raw
    except Exception as error:
        return {"error": f"NVML query failed: {one_line(error)}"}


def parse_nvml(raw: dict[str, Any]) -> dict[str, Any]:
    """Driver, CUDA driver version and per-GPU facts from `read_nvml()`'s raw values."""
    if "error" in raw and not raw.get("devices"):
        return {"driver_version": None, "cuda_driver_version": None, "devices": [],
                "reason": raw["error"]}
    devices = [
        {
            "index": device["index"],
            "name": _text_or_none(device.get("name")),
            "uuid": _text_or_none(device.get("uuid")),
            "pci_bus_id": _text_or_none(device.get("pci_bus_id")),
            "memory_mib": _mib(device.get("memory_total")),
            "compute_capability": _capability(device.get("compute_capability")),
            "mig_mode": _mode(device.get("mig_mode"), MIG_MODES),
            "ecc_mode": _mode(device.get("ecc_mode"), ECC_MODES),
        }
        for device in raw.get("devices", [])
    ]
    return {
        "driver_version": _text_or_none(raw.get("driver_version")),
        "cuda_driver_version": cuda_version(raw.get("cuda_driver_version")),
        "devices": devices,
    }


def cuda_version(value: Raw) -> str | None:
    """NVML's integer CUDA version (12080) as text ("12.8")."""
    if not isinstance(value, int):
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def normalize_uuid(uuid: str | None) -> str | None:
    """NVML says "GPU-1a2b...", torch says "1a2b...": compare the bare lower-case form."""
    if not uuid:
        return None
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        text = text.removeprefix(prefix)
    return text


def join_gpus(nvml_devices: list[dict[str, Any]], torch_devices: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """One entry per GPU the training saw (torch ordinal order), NVML facts joined on UUID.

    Without torch's view (no CUDA in the process), the NVML list is the answer. A torch device
    whose UUID NVML does not know keeps torch's facts only.
    """
    by_uuid = {normalize_uuid(d.get("uuid")): d for d in nvml_devices if d.get("uuid")}
    if not torch_devices:
        return [{**device, "source": "nvml"} for device in nvml_devices]
    joined = []
    for device in torch_devices:
        match = by_uuid.get(normalize_uuid(device.get("uuid")))
        entry: dict[str, Any] = {
            "index": device["index"],
            "name": device.get("name"),
            "uuid": device.get("uuid"),
            "compute_capability": device.get("compute_capability"),
            "memory_mib": _mib(device.get("total_memory")),
            "multi_processor_count": device.get("multi_processor_count"),
            "source": "torch",
        }
        if match is not None:
            entry.update(
                name=match.get("name") or entry["name"],
                compute_capability=match.get("compute_capability") or entry["compute_capability"],
                uuid=match["uuid"],
                nvml_index=match["index"],
                pci_bus_id=match.get("pci_bus_id"),
                memory_mib=match.get("memory_mib") or entry["memory_mib"],
                mig_mode=match.get("mig_mode"),
                ecc_mode=match.get("ecc_mode"),
                source="nvml+torch",
            )
        joined.append(entry)
    return joined


def nvml_call(function: Any, *args: Any) -> Raw:
    """`function(*args)`, or `{"error": ...}` when NVML raises: one field must not lose the
    others."""
    try:
        return function(*args)
    except Exception as error:
        return {"error": one_line(error)}



def _text_or_none(value: Raw) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


def _mib(value: Raw) -> int | None:
    return value // (1 << 20) if isinstance(value, int) else None


def _capability(value: Raw) -> str | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{value[0]}.{value[1]}"
    return None


def _mode(value: Raw, names: dict[int, str]) -> str:
    """(current, pending) pair -> "enabled"; a pending change is shown; errors say why."""
    if isinstance(value, dict):
        message = value.get("error", "")
        return "not supported" if "not supported" in message.lower() else f"unknown ({message})"
    if isinstance(value, (list, tuple)) and value:
        current = names.get(value[0], str(value[0]))
        if len(value) > 1 and value[1] != value[0]:
            return f"{current} (pending {names.get(value[1], str(value[1]))})"
        return current
    return "unknown"
