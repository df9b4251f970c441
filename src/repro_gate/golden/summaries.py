"""An artifact as the golden document keeps it: its sha256, and for a checkpoint each tensor's
digest and summary (shape, dtype, norm, max abs), read without torch."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from repro_gate.compare.artifacts import TORCH_SUFFIXES
from repro_gate.errors import GateError

DIGEST_CHARS = 16


def artifact_entry(rel_path: str, path: Path) -> dict[str, Any]:
    """`{path, sha256, tensors?}` of one artifact file."""
    entry: dict[str, Any] = {"path": rel_path, "sha256": file_sha256(path)}
    tensors = tensor_summaries(rel_path, path)
    if tensors is not None:
        entry["tensors"] = tensors
    return entry


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tensor_summaries(rel_path: str, path: Path) -> list[dict[str, Any]] | None:
    """Each tensor of a checkpoint, summarised; None for a file that is not one (or unreadable
    tensor by tensor: its sha256 alone is compared)."""
    from repro_gate.compare import checkpoints

    suffix = path.suffix.lower()
    if suffix in TORCH_SUFFIXES:
        load = checkpoints.load_torch
    elif suffix == ".safetensors":
        load = checkpoints.load_safetensors
    else:
        return None
    try:
        checkpoint = load(path, rel_path, "golden")
    except (checkpoints.NotComparable, GateError):
        return None
    return [summary(name, tensor) for name, tensor in checkpoint.tensors.items()]


def summary(name: str, tensor: np.ndarray) -> dict[str, Any]:
    """A tensor's digest (of its bytes), shape, dtype, L2 norm and largest absolute value."""
    values = tensor.astype(np.float64) if tensor.dtype.kind in "fiub" else None
    norm = float(np.sqrt(np.sum(values * values))) if values is not None else None
    max_abs = float(np.max(np.abs(values))) if values is not None and values.size else None
    return {
        "name": name,
        "digest": hashlib.sha256(np.ascontiguousarray(tensor).tobytes()).hexdigest()[:DIGEST_CHARS],
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "norm": _finite(norm),
        "max_abs": _finite(max_abs),
    }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
