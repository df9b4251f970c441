"""Host hardware: CPU model and count, GPUs from NVML."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from repro_gate.fingerprint.nvml import parse_nvml, read_nvml


def collect_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """CPU model (from /proc/cpuinfo where there is one) and logical CPU counts."""
    available: int | None
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count()
    return {
        "model": cpu_model(cpuinfo) or platform.processor() or None,
        "count": os.cpu_count(),
        "available": available,
        "machine": platform.machine(),
    }


def cpu_model(cpuinfo: Path) -> str | None:
    """`model name` (x86) or `Model`/`CPU part` style fields (ARM) of the first CPU."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "model", "cpu model", "hardware"):
        if fields.get(key):
            return fields[key]
    return None


def collect_gpus() -> dict[str, Any]:
    """NVML's view of the GPUs; `reason` says why it is empty on a machine without NVML."""
    return parse_nvml(read_nvml())
