"""The service's slots: one per GPU NVML lists, one per MIG instance, or the GPUs listed by UUID.

`read_devices()` is the thin reader (pynvml calls only, each raw value or the error it raised,
as `fingerprint.nvml` does); `slots_from_raw()` turns those raw values into slots and is pure, so
the tests run it on values recorded from real machines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repro_gate.errors import ConfigError, one_line
from repro_gate.fingerprint.nvml import (
    MIG_MODES,
    NvmlUnavailable,
    normalize_uuid,
    nvml_call,
    nvml_session,
)
from repro_gate.runner.runner_config import DEFAULT_GPU_MODEL, SlotSettings, SlotSource

Raw = dict[str, Any]


@dataclass(frozen=True)
class Slot:
    """One GPU (or MIG instance) that gets its own runner."""

    index: int
    uuid: str  # GPU-… or MIG-…: what the runner container's device request and the hook use
    model: str  # for the label; a MIG instance names its profile ("… MIG 1g.10gb")
    parent_uuid: str | None = None  # the physical GPU of a MIG instance


def read_devices() -> Raw:
    """Raw NVML values for slot discovery, or {"error": reason} when NVML cannot be used."""
    try:
        with nvml_session() as pynvml:
            return _devices(pynvml)
    except NvmlUnavailable as error:
        return {"error": str(error)}


def _devices(pynvml: Any) -> Raw:
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            devices.append({
                "index": index,
                "name": nvml_call(pynvml.nvmlDeviceGetName, handle),
                "uuid": nvml_call(pynvml.nvmlDeviceGetUUID, handle),
                "minor": nvml_call(pynvml.nvmlDeviceGetMinorNumber, handle),  # /dev/nvidiaN
                "mig_mode": nvml_call(pynvml.nvmlDeviceGetMigMode, handle),
                "mig_devices": _mig_devices(pynvml, handle),
            })
        return {"devices": devices}
    except Exception as error:
        return {"error": f"NVML query failed: {one_line(error)}"}


def _mig_devices(pynvml: Any, handle: Any) -> list[Raw] | Raw:
    """The MIG instances of a GPU in MIG mode ([] when none, {"error"} when not supported)."""
    count = nvml_call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    if isinstance(count, dict):
        return count
    found = []
    for position in range(count):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, position)
        except Exception:  # NVML_ERROR_NOT_FOUND: no instance at this position
            continue
        found.append({"name": nvml_call(pynvml.nvmlDeviceGetName, mig),
                      "uuid": nvml_call(pynvml.nvmlDeviceGetUUID, mig)})
    return found


def slots_from_raw(raw: Raw, settings: SlotSettings) -> list[Slot]:
    """The slots `settings` asks for, from `read_devices()`'s raw values."""
    devices = raw.get("devices") or []
    if settings.source is SlotSource.UUIDS:
        return _listed(devices, settings)
    if "error" in raw:
        raise ConfigError(f"slots: cannot discover GPUs: {raw['error']} (list them by UUID"
                          " with slots.source: uuids, or fix the driver)")
    found: list[tuple[str, str, str | None]] = []
    for device in devices:
        uuid, model = _text(device.get("uuid")), _text(device.get("name")) or DEFAULT_GPU_MODEL
        if uuid is None:
            continue  # a GPU NVML cannot name cannot be requested by UUID
        migs = device.get("mig_devices")
        if settings.source is SlotSource.MIG and _mig_enabled(device) and isinstance(migs, list):
            found += [(u, _text(m.get("name")) or model, uuid) for m in migs
                      if (u := _text(m.get("uuid")))]
        else:
            found.append((uuid, model, None))
    if not found:
        raise ConfigError("slots: NVML lists no GPU with a UUID on this machine")
    return [Slot(index, uuid, model, parent) for index, (uuid, model, parent) in enumerate(found)]


def _listed(devices: list[Raw], settings: SlotSettings) -> list[Slot]:
    """Listed UUIDs, in the file's order; NVML (when it answers) names each model."""
    models: dict[str | None, tuple[str, str | None]] = {}
    for device in devices:
        uuid, name = _text(device.get("uuid")), _text(device.get("name"))
        models[normalize_uuid(uuid)] = (name or "", None)
        migs = device.get("mig_devices")
        for mig in migs if isinstance(migs, list) else []:
            models[normalize_uuid(_text(mig.get("uuid")))] = (_text(mig.get("name")) or "", uuid)
    slots = []
    for index, uuid in enumerate(settings.uuids):
        model, parent = models.get(normalize_uuid(uuid), ("", None))
        slots.append(Slot(index, uuid, model or settings.model or DEFAULT_GPU_MODEL, parent))
    return slots


def discover(settings: SlotSettings) -> list[Slot]:
    """This machine's slots."""
    return slots_from_raw(read_devices(), settings)


def _mig_enabled(device: Raw) -> bool:
    mode = device.get("mig_mode")
    return isinstance(mode, (list, tuple)) and bool(mode) and MIG_MODES.get(mode[0]) == "enabled"



def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) and value else None
