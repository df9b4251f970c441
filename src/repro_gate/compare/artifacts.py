"""Comparing one artifact of run A with the same relative path of run B."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro_gate.compare.document import ArtifactResult
from repro_gate.compare.fields import FieldPattern
from repro_gate.compare.files import compare_bytes
from repro_gate.compare.status import EQUAL, MISSING_IN_A, MISSING_IN_B, worst
from repro_gate.compare.structured import compare_structured, diff_leaf, summary
from repro_gate.compare.tolerance import Tolerance

if TYPE_CHECKING:
    from repro_gate.compare.checkpoints import Checkpoint

TORCH_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin"}
STRUCTURED_SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def compare_artifact(
    path_a: Path,
    path_b: Path,
    rel_path: str,
    tolerance: Tolerance | None,
    ignore: tuple[FieldPattern, ...] = (),
) -> ArtifactResult:
    """An `artifact_comparison` (without `runs`) for two files, chosen by their extension.

    `ignore` names fields of a JSON/YAML artifact that are not compared (`compare.ignore`).
    """
    suffix = Path(rel_path).suffix.lower()
    if suffix in TORCH_SUFFIXES:
        return compare_checkpoints(path_a, path_b, rel_path, "torch", tolerance)
    if suffix == ".safetensors":
        return compare_checkpoints(path_a, path_b, rel_path, "safetensors", tolerance)
    if suffix in STRUCTURED_SUFFIXES:
        kind = STRUCTURED_SUFFIXES[suffix]
        return compare_structured(path_a, path_b, rel_path, kind, tolerance, ignore)
    unapplied = "compare.ignore not applied: fields are only left out of JSON/YAML files"
    return compare_bytes(path_a, path_b, rel_path, note=unapplied if ignore else "")


def compare_checkpoints(
    path_a: Path, path_b: Path, rel_path: str, kind: str, tolerance: Tolerance | None
) -> ArtifactResult:
    """Compare two checkpoints tensor by tensor, or by bytes when they cannot be loaded safely.

    Neither kind needs torch: it is only the fallback for torch.save files the reader refuses.
    """
    # Imported here: numpy and the readers cost start-up time that most gates never need.
    from repro_gate.compare import checkpoints

    load = checkpoints.load_torch if kind == "torch" else checkpoints.load_safetensors
    try:
        checkpoint_a = load(path_a, rel_path, "A")
        checkpoint_b = load(path_b, rel_path, "B")
    except checkpoints.NotComparable as reason:
        return compare_bytes(path_a, path_b, rel_path, note=str(reason))
    return checkpoint_result(rel_path, kind, checkpoint_a, checkpoint_b, tolerance)


def checkpoint_result(
    rel_path: str,
    kind: str,
    a: Checkpoint,
    b: Checkpoint,
    tolerance: Tolerance | None,
) -> ArtifactResult:
    """The `artifact_comparison` of two loaded checkpoints; equal tensors counted, not listed."""
    from repro_gate.compare.dtypes import dtype_name
    from repro_gate.compare.tensors import compare_tensors, describe

    tensor_diffs = []
    mismatches = []
    for name in union(a.tensors, b.tensors):
        if name not in b.tensors:
            tensor_diffs.append(describe(name, a.tensors[name], MISSING_IN_B))
        elif name not in a.tensors:
            tensor_diffs.append(describe(name, b.tensors[name], MISSING_IN_A))
        else:
            tensor_a, tensor_b = a.tensors[name], b.tensors[name]
            tensor_diffs.append(compare_tensors(name, tensor_a, tensor_b, tolerance))
            if tensor_a.dtype != tensor_b.dtype or tensor_a.shape != tensor_b.shape:
                mismatches.append(
                    f"{name}: {dtype_name(tensor_a)}{list(tensor_a.shape)} in A, "
                    f"{dtype_name(tensor_b)}{list(tensor_b.shape)} in B"
                )
    key_diffs = []
    for name in union(a.values, b.values):
        if name not in b.values:
            key_diffs.append({"key": name, "status": MISSING_IN_B, "a": summary(a.values[name])})
        elif name not in a.values:
            key_diffs.append({"key": name, "status": MISSING_IN_A, "b": summary(b.values[name])})
        else:
            key_diffs.append(diff_leaf(name, a.values[name], b.values[name], tolerance))

    unequal_tensors = [diff for diff in tensor_diffs if diff["status"] != EQUAL]
    unequal_keys = [diff for diff in key_diffs if diff["status"] != EQUAL]
    notes = [
        f"{len(tensor_diffs) - len(unequal_tensors)} of {len(tensor_diffs)} tensors bitwise "
        "equal (equal ones not listed)"
    ]
    if key_diffs:
        notes.append(f"{len(key_diffs) - len(unequal_keys)} of {len(key_diffs)} other values equal")
    notes.extend(mismatches)
    result: ArtifactResult = {
        "path": rel_path,
        "kind": kind,
        "status": worst(diff["status"] for diff in tensor_diffs + key_diffs),
        "note": "; ".join(notes),
    }
    if tolerance is not None:
        result["tolerance"] = tolerance.as_dict()
    if unequal_tensors:
        result["tensors"] = unequal_tensors
    if unequal_keys:
        result["keys"] = unequal_keys
    return result


def union(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """Names of `first` in order, then those only in `second`."""
    return list(first) + [name for name in second if name not in first]
