"""An artifact as the golden document keeps it: the file's sha256 and, for a checkpoint, each
tensor's digest, shape, dtype, L2 norm and largest absolute value."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from repro_gate.golden.summaries import DIGEST_CHARS, artifact_entry, summary, tensor_summaries


def test_a_checkpoint_keeps_a_summary_of_each_tensor(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    weight = np.array([[3.0, -4.0], [0.0, 0.0]], dtype=np.float32)
    save_file({"w": weight, "steps": np.array([7], dtype=np.int64)}, str(path))
    entry = artifact_entry("ckpt/model.safetensors", path)
    assert entry["path"] == "ckpt/model.safetensors"
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    by_name = {tensor["name"]: tensor for tensor in entry["tensors"]}
    assert by_name["w"] == {
        "name": "w", "digest": hashlib.sha256(weight.tobytes()).hexdigest()[:DIGEST_CHARS],
        "shape": [2, 2], "dtype": "float32", "norm": 5.0, "max_abs": 4.0}
    assert (by_name["steps"]["norm"], by_name["steps"]["max_abs"]) == (7.0, 7.0)


def test_a_file_that_is_no_checkpoint_keeps_only_its_sha256(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{"loss": 0.5}')
    assert artifact_entry("metrics.json", path) == {
        "path": "metrics.json", "sha256": hashlib.sha256(b'{"loss": 0.5}').hexdigest()}


def test_an_unreadable_checkpoint_is_compared_by_its_sha256_alone(tmp_path: Path) -> None:
    broken = tmp_path / "model.pt"
    broken.write_text("not a checkpoint")
    assert tensor_summaries("model.pt", broken) is None
    assert "tensors" not in artifact_entry("model.pt", broken)


def test_values_without_a_finite_meaning_are_null() -> None:
    infinite = summary("w", np.array([1.0, np.inf]))
    assert (infinite["norm"], infinite["max_abs"]) == (None, None)
    empty = summary("e", np.zeros((0, 3), dtype=np.float32))
    assert (empty["norm"], empty["max_abs"], empty["shape"]) == (0.0, None, [0, 3])
    complex_values = summary("c", np.array([1 + 1j]))
    assert (complex_values["norm"], complex_values["max_abs"]) == (None, None)
    flags = summary("m", np.array([True, False, True]))
    assert flags["norm"] == math.sqrt(2) and flags["dtype"] == "bool"


def test_the_digest_depends_on_the_bytes_not_the_layout() -> None:
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    transposed_copy = np.ascontiguousarray(array.T).T  # same values, Fortran order
    assert summary("a", array)["digest"] == summary("a", transposed_copy)["digest"]
    assert summary("a", array)["digest"] != summary("a", array + 1)["digest"]
