"""The job-started hook of a repro-gate runner (ACTIONS_RUNNER_HOOK_JOB_STARTED).

Runs in the runner container before the job's first step, with python3 and the standard library
only (it never imports repro_gate: the runner image does not have it). It

1. finds the GPUs this container sees: through NVML (`pynvml`) when importable and the driver
   answers, else from `nvidia-smi -L` when that is on PATH;
2. refuses the job (exit 1, one line on stderr) when the runner is dedicated to one repository
   (REPRO_GATE_HOOK_REPOSITORY) and the job's GITHUB_REPOSITORY is another; when the slot's
   GPU (REPRO_GATE_SLOT_UUID) is not among them, or when NVML reports it unhealthy:
   uncorrectable ECC errors since the driver loaded, retired pages pending, a row remap
   pending or failed, a temperature at or over the GPU's own slowdown threshold (nvidia-smi
   cannot tell health: visibility only);
3. appends `REPRO_GATE_GPUS=<uuid>` to $GITHUB_ENV, which the job's steps (and the repro-gate
   action, as its default `gpus`) see;
4. when REPRO_GATE_HOOK_STATUS names a file, writes its outcome there for the service (which
   polls it to learn that a job started): `{"outcome": "accepted", "uuid": …}` or
   `{"outcome": "refused", "reason": …}`, atomically. A status that cannot be written is said
   on stderr and does not change the exit code: the job's fate is the check's, not the file's.

With neither NVML nor nvidia-smi there is nothing to check with, and the job is refused with
"no GPU visible", unless REPRO_GATE_HOOK_ALLOW_NO_GPU=1 is set in the runner container's
environment (CPU-only trials and tests; the job cannot set it: the hook runs before its steps).
That flag never overrides a check that ran and failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any

SLOT_VARIABLE = "REPRO_GATE_SLOT_UUID"
ALLOW_NO_GPU_VARIABLE = "REPRO_GATE_HOOK_ALLOW_NO_GPU"
GPUS_VARIABLE = "REPRO_GATE_GPUS"
STATUS_VARIABLE = "REPRO_GATE_HOOK_STATUS"
REPOSITORY_VARIABLE = "REPRO_GATE_HOOK_REPOSITORY"
UUID_PATTERN = re.compile(r"^(GPU|MIG)-[0-9A-Fa-f-]+$")
SMI_UUID = re.compile(r"UUID: ((?:GPU|MIG)-[0-9A-Fa-f-]+)")
# NVML constants (nvml.h), so the module needs no pynvml to be imported for judging.
UNCORRECTED, VOLATILE = 1, 0
TEMPERATURE_GPU, THRESHOLD_SLOWDOWN = 0, 1
FEATURE_ENABLED = 1


class Refusal(Exception):
    """The job must not run on this runner; the text says why."""


def read_nvml() -> dict[str, Any]:
    """Raw NVML values of the visible GPUs, or {"error": reason}."""
    try:
        import pynvml
    except ImportError:
        return {"error": "pynvml is not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as error:
        return {"error": f"NVML is not available: {error}"}
    try:
        return {"source": "nvml", "devices": [
            _device(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
            for index in range(pynvml.nvmlDeviceGetCount())]}
    except Exception as error:
        return {"error": f"NVML query failed: {error}"}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _device(pynvml: Any, handle: Any) -> dict[str, Any]:
    return {
        "uuid": _call(pynvml.nvmlDeviceGetUUID, handle),
        "mig_uuids": _mig_uuids(pynvml, handle),
        "ecc_uncorrected_volatile": _call(pynvml.nvmlDeviceGetTotalEccErrors, handle,
                                          UNCORRECTED, VOLATILE),
        "retired_pages_pending": _call(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, handle),
        "remapped_rows": _call(pynvml.nvmlDeviceGetRemappedRows, handle),
        "temperature": _call(pynvml.nvmlDeviceGetTemperature, handle, TEMPERATURE_GPU),
        "slowdown_temperature": _call(pynvml.nvmlDeviceGetTemperatureThreshold, handle,
                                      THRESHOLD_SLOWDOWN),
    }


def _mig_uuids(pynvml: Any, handle: Any) -> list[Any]:
    found: list[Any] = []
    count = _call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    for position in range(count if isinstance(count, int) else 0):
        try:
            found.append(pynvml.nvmlDeviceGetUUID(
                pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, position)))
        except Exception:  # no instance at this position
            continue
    return found


def read_nvidia_smi() -> dict[str, Any]:
    """The UUIDs `nvidia-smi -L` lists, or {"error": reason}."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"error": "nvidia-smi is not on PATH"}
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"nvidia-smi -L failed: {error}"}
    if done.returncode != 0:
        return {"error": f"nvidia-smi -L exited {done.returncode}: {done.stderr.strip()[:200]}"}
    return {"source": "nvidia-smi", "devices": [
        {"uuid": uuid} for uuid in SMI_UUID.findall(done.stdout)]}


def judge(raw: dict[str, Any], uuid: str) -> str | None:
    """Why the slot's GPU cannot take the job, from the raw values, or None when it can."""
    wanted = uuid.lower()
    for device in raw.get("devices", []):
        names = [_text(device.get("uuid")), *map(_text, device.get("mig_uuids") or [])]
        if wanted in (name.lower() for name in names if name):
            return _health_problem(device, uuid)
    visible = ", ".join(u for d in raw.get("devices", []) if (u := _text(d.get("uuid"))))
    return f"GPU {uuid} is not visible in this runner (visible: {visible or 'none'})"


def _health_problem(device: dict[str, Any], uuid: str) -> str | None:
    """The first health problem NVML reports; values NVML could not read are not judged."""
    ecc = device.get("ecc_uncorrected_volatile")
    if isinstance(ecc, int) and ecc > 0:
        return f"GPU {uuid} has {ecc} uncorrectable ECC errors since the driver loaded"
    if device.get("retired_pages_pending") == FEATURE_ENABLED:
        return f"GPU {uuid} has retired pages pending (reset the GPU)"
    rows = device.get("remapped_rows")
    if isinstance(rows, (list, tuple)) and len(rows) >= 4 and (rows[2] or rows[3]):
        state = "failed" if rows[3] else "pending"
        return f"GPU {uuid} has a row remap {state} (reset the GPU)"
    temperature, limit = device.get("temperature"), device.get("slowdown_temperature")
    if isinstance(temperature, int) and isinstance(limit, int) and temperature >= limit:
        return f"GPU {uuid} is at {temperature} C, at or over its slowdown threshold {limit} C"
    return None


def check(environ: dict[str, str]) -> str:
    """The slot's UUID when the job may run; Refusal otherwise."""
    uuid = environ.get(SLOT_VARIABLE, "")
    if not UUID_PATTERN.match(uuid):
        raise Refusal(f"{SLOT_VARIABLE} is {uuid!r}, not a GPU-/MIG- UUID: this runner was"
                      " not started by `repro-gate runner`")
    dedicated = environ.get(REPOSITORY_VARIABLE)
    if dedicated and environ.get("GITHUB_REPOSITORY") != dedicated:
        # Its environment caches are that repository's: no other repository's job may use or
        # prepare them.
        raise Refusal(f"this runner serves {dedicated} only, not"
                      f" {environ.get('GITHUB_REPOSITORY')!r}")
    raw = read_nvml()
    if "error" in raw:
        raw = read_nvidia_smi()
    if "error" in raw:
        if environ.get(ALLOW_NO_GPU_VARIABLE) == "1":
            print(f"repro-gate hook: no GPU tool in this runner; {ALLOW_NO_GPU_VARIABLE}=1,"
                  f" so {uuid} is handed to the job unchecked", file=sys.stderr)
            return uuid
        raise Refusal(f"no GPU visible: neither NVML nor nvidia-smi answers in this runner"
                      f" ({raw['error']})")
    problem = judge(raw, uuid)
    if problem:
        raise Refusal(problem)
    return uuid


def main() -> int:
    environ = dict(os.environ)
    try:
        uuid = check(environ)
        github_env = environ.get("GITHUB_ENV")
        if not github_env:
            raise Refusal("GITHUB_ENV is not set: not running as a job-started hook")
        try:
            with open(github_env, "a", encoding="utf-8") as handle:
                handle.write(f"{GPUS_VARIABLE}={uuid}\n")
        except OSError as error:
            raise Refusal(f"cannot write GITHUB_ENV: {error}") from None
    except Refusal as refusal:
        print(f"repro-gate hook: refusing the job: {refusal}", file=sys.stderr)
        report_status(environ, {"outcome": "refused", "reason": str(refusal)})
        return 1
    print(f"repro-gate hook: {uuid} is visible and healthy; the job gets it as {GPUS_VARIABLE}")
    report_status(environ, {"outcome": "accepted", "uuid": uuid})
    return 0


def report_status(environ: dict[str, str], status: dict[str, str]) -> None:
    """Write `status` where REPRO_GATE_HOOK_STATUS says (if set): a temporary file beside it,
    then a rename, so the polling service never reads half a file."""
    path = environ.get(STATUS_VARIABLE)
    if not path:
        return
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(status, handle)
        os.chmod(temporary, 0o644)  # the runner's user writes it; the service must read it
        os.replace(temporary, path)
    except OSError as error:
        print(f"repro-gate hook: cannot write the status file {path}: {error}", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _call(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception as error:
        return {"error": str(error)}


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


if __name__ == "__main__":
    sys.exit(main())
