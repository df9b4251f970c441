"""The GPU health check the service runs on the host before it offers a slot (again).

The rules are the job-started hook's (`judge`: uncorrectable ECC errors, pending retired pages,
pending or failed row remaps, temperature at the slowdown threshold), imported rather than copied
so the service and the hook can never disagree on what healthy means. The host adds what the
hook cannot see: whether NVML lists the slot's GPU at all, and compute processes still running
on it after a job (a process of the last job must not share the GPU with the next one).

The driver knows no PID namespaces: NVML names host PIDs even to a service run in a container
(NVIDIA/nvidia-docker#1483), so the PIDs a reason names are the host's.

`read_health()` is the thin reader (pynvml calls only, each raw value or the error it raised, as
`slots.read_devices` does); `health_from_raw()` judges those raw values and is pure, so the tests
run it on values recorded from real machines; `check_slot()` puts them together and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repro_gate.errors import one_line
from repro_gate.fingerprint.nvml import (
    NvmlUnavailable,
    normalize_uuid,
    nvml_call,
    nvml_session,
)
from repro_gate.runner._repro_gate_job_started import judge
from repro_gate.runner.runner_config import HealthSettings
from repro_gate.runner.slots import Slot

Raw = dict[str, Any]
# Seconds between two process listings while a job's processes get time to exit; each listing
# initialises NVML again, which is cheap next to the wait itself.
PROCESS_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class HealthReport:
    """A slot's health. `reason` says why it is unhealthy, or why it was not checked."""

    healthy: bool
    reason: str | None
    checked: bool  # False: NVML was absent, nothing was checked
    leftover_pids: tuple[int, ...] = ()  # set when processes are the only problem (worth a wait)


def read_health(slot: Slot) -> Raw:
    """Raw NVML values of every GPU, and the compute processes on the slot's (MIG) device.

    {"absent": reason} when NVML cannot be used at all; {"error": reason} when it answered and
    then failed.
    """
    try:
        with nvml_session() as pynvml:
            return _read_slot(pynvml, slot)
    except NvmlUnavailable as error:
        return {"absent": str(error)}


def _read_slot(pynvml: Any, slot: Slot) -> Raw:
    try:
        raw: Raw = {"devices": []}
        for index in range(pynvml.nvmlDeviceGetCount()):
            device, slot_handle = _device(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index), slot)
            raw["devices"].append(device)
            if slot_handle is not None:
                raw["processes"] = nvml_call(_compute_pids, pynvml, slot_handle)
        return raw
    except Exception as error:
        return {"error": f"NVML query failed: {one_line(error)}"}


def _device(pynvml: Any, handle: Any, slot: Slot) -> tuple[Raw, Any | None]:
    """One GPU in the shape the hook's `judge` reads, and the handle of the slot if it is here."""
    uuid = nvml_call(pynvml.nvmlDeviceGetUUID, handle)
    migs = _mig_handles(pynvml, handle)
    device = {
        "uuid": uuid,
        "mig_uuids": [mig_uuid for mig_uuid, _ in migs],
        "ecc_uncorrected_volatile": nvml_call(
            pynvml.nvmlDeviceGetTotalEccErrors, handle,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
        "retired_pages_pending": nvml_call(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, handle),
        "remapped_rows": nvml_call(pynvml.nvmlDeviceGetRemappedRows, handle),
        "temperature": nvml_call(pynvml.nvmlDeviceGetTemperature, handle,
                                 pynvml.NVML_TEMPERATURE_GPU),
        "slowdown_temperature": nvml_call(pynvml.nvmlDeviceGetTemperatureThreshold, handle,
                                          pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
    }
    # A MIG slot's processes are listed on its MIG handle: the GPU's own handle does not say
    # which instance runs them.
    found = [h for name, h in [(uuid, handle), *migs] if _same_uuid(name, slot.uuid)]
    return device, (found[0] if found else None)


def _mig_handles(pynvml: Any, handle: Any) -> list[tuple[Any, Any]]:
    """(raw UUID, handle) of each MIG instance of a GPU; [] when it has none or no MIG."""
    count = nvml_call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    found = []
    for position in range(count if isinstance(count, int) else 0):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, position)
        except Exception:  # NVML_ERROR_NOT_FOUND: no instance at this position
            continue
        found.append((nvml_call(pynvml.nvmlDeviceGetUUID, mig), mig))
    return found


def _compute_pids(pynvml: Any, handle: Any) -> list[int]:
    return [int(process.pid) for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]


def health_from_raw(raw: Raw, slot: Slot) -> HealthReport:
    """The slot's health from `read_health()`'s raw values (NVML absent: unhealthy, unchecked)."""
    if "absent" in raw:
        return HealthReport(False, f"GPU {slot.uuid} cannot be checked: {raw['absent']}", False)
    if "error" in raw:
        return HealthReport(False, f"GPU {slot.uuid} cannot be checked: {raw['error']}", True)
    devices = raw.get("devices") or []
    names = [n for d in devices for n in (d.get("uuid"), *(d.get("mig_uuids") or []))]
    if not any(_same_uuid(name, slot.uuid) for name in names):
        visible = ", ".join(t for name in names if (t := _text(name)))
        return HealthReport(False, f"GPU {slot.uuid} is not visible to NVML on this host"
                                   f" (visible: {visible or 'none'})", True)
    problem = judge(raw, slot.uuid)
    if problem:
        return HealthReport(False, problem, True)
    pids = raw.get("processes")
    if isinstance(pids, list) and pids:  # a listing NVML could not give is not judged
        listed = ", ".join(str(pid) for pid in pids)
        return HealthReport(False, f"GPU {slot.uuid} still runs compute processes (PID {listed})",
                            True, tuple(pids))
    return HealthReport(True, None, True)


def wait_for_health(read: Callable[[], Raw], slot: Slot, wait_seconds: float,
                    poll_seconds: float = PROCESS_POLL_SECONDS) -> HealthReport:
    """Judge `read()`; while compute processes are the only problem, read again until they
    are gone or `wait_seconds` have passed (a job's processes may take a moment to exit)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        report = health_from_raw(read(), slot)
        remaining = deadline - time.monotonic()
        if not report.leftover_pids or remaining <= 0:
            break
        time.sleep(min(poll_seconds, remaining))
    if report.leftover_pids and wait_seconds > 0:
        return HealthReport(False, f"{report.reason} after waiting {wait_seconds:g} s", True,
                            report.leftover_pids)
    return report


def check_slot(slot: Slot, settings: HealthSettings, *, wait_for_processes: bool
               ) -> HealthReport:
    """The slot's health on this host; never raises (a failure here marks the slot unhealthy
    instead of ending the slot's thread)."""
    wait = settings.leftover_process_wait if wait_for_processes else 0.0
    try:
        report = wait_for_health(lambda: read_health(slot), slot, wait)
    except Exception as error:
        return HealthReport(False, f"GPU {slot.uuid} health check failed: {one_line(error)}",
                            True)
    if not report.checked and settings.allow_no_gpu:
        return HealthReport(True, f"{report.reason}; health.allow_no_gpu is set, so the slot"
                                  " is offered unchecked", False)
    return report


def _same_uuid(raw_uuid: Any, uuid: str) -> bool:
    return normalize_uuid(_text(raw_uuid)) == normalize_uuid(uuid)


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) and value else None
