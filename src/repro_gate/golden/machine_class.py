"""The machine class a golden trajectory belongs to: what a pull request cannot change.

The accelerator's model and count (`gpu-h100-x8`), or the CPU's vendor and model for a CPU run
(`cpu-amd-epyc`). Driver, CUDA and all software are compared and reported, never part of it.
"""

from __future__ import annotations

import re
from typing import Any

# Words of a GPU name that say the vendor or the product line, not the model.
VENDOR_WORDS = {"nvidia", "amd", "geforce", "tesla", "quadro", "radeon", "instinct"}
# Words of a CPU model that are marketing, not the model.
CPU_NOISE = {"r", "tm", "processor", "cpu", "core"}


def machine_class(fingerprint: dict[str, Any]) -> str:
    """The slug of the machine a fingerprint was collected on."""
    hardware = fingerprint.get("hardware") or {}
    names = [gpu.get("name") for gpu in hardware.get("gpus") or [] if gpu.get("name")]
    if names:
        return f"gpu-{gpu_model(names[0])}-x{len(names)}"
    cpu = (hardware.get("cpu") or {}).get("model") or hardware.get("cpu", {}).get("machine")
    return f"cpu-{cpu_model(str(cpu or 'unknown'))}"


def gpu_model(name: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `h100`: the words up to the first one holding a digit."""
    words = [w for w in _words(name) if w not in VENDOR_WORDS]
    kept: list[str] = []
    for word in words:
        kept.append(word)
        if any(c.isdigit() for c in word):
            break
    return "-".join(kept) or "unknown"


def cpu_model(model: str) -> str:
    """`AMD EPYC 7763 64-Core Processor` -> `amd-epyc-7763`; `AMD EPYC` -> `amd-epyc`."""
    words = [w for w in _words(model) if w not in CPU_NOISE and not w.endswith("core")]
    words = [w for w in words if not re.fullmatch(r"\d+(\.\d+)?ghz", w)]
    return "-".join(words[:3]) or "unknown"


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9.]+", text.lower().replace("@", " ")) if w]
