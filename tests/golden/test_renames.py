"""Run A under the golden file's tensor names: tensors on one side only paired by value
(position breaking ties), the per-step digests combined again, a checkpoint's tensors renamed
the same way; a rename alone compares as the same numbers, a real change still shows where it
starts. Both sides are golden documents built from step records and real safetensors files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from helpers.paths import ROOT
from safetensors.numpy import save_file

from repro_gate.golden import document
from repro_gate.golden.comparison import CHANGED, SAME, WITHIN_TOLERANCE, Tolerance, compare
from repro_gate.golden.renames import Rename, Tensor, pair, under_golden_names

FINGERPRINT = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())[
    "fingerprint"]
BITWISE = Tolerance()
FC = ["fc.weight", "fc.bias", "head.weight", "head.bias"]
PROJ = ["proj.weight", "proj.bias", "head.weight", "head.bias"]
# The initial digests, by position: both biases start at zero, so they share a digest.
INITIAL = ["w-fc", "zero", "w-head", "zero"]


def trajectory(names: list[str], steps: int = 4, loss_from: int | None = None,
               initial: list[str] = INITIAL) -> list[dict[str, Any]]:
    """The probe's records of a model whose tensors are `names`, the values given by position;
    from step `loss_from` on, another loss."""
    records = []
    for step in range(1, steps + 1):
        loss = 1.5 if loss_from is not None and step >= loss_from else 1.0
        record: dict[str, Any] = {
            "step": step, "loss": loss.hex(), "inputs": f"i{step}",
            "grads": {name: f"g{step}-{i}-{loss}" for i, name in enumerate(names)},
            "params": {name: f"p{step}-{i}-{loss}" for i, name in enumerate(names)}}
        if step == 1:
            record["init"] = dict(zip(names, initial, strict=True))
        records.append(record)
    return records


def checkpoint(folder: Path, tensors: dict[str, np.ndarray]) -> tuple[str, Path]:
    folder.mkdir()
    path = folder / "model.safetensors"
    save_file(tensors, str(path))
    return ("model.safetensors", path)


def built(records: list[dict[str, Any]], artifacts: list[tuple[str, Path]] | None = None
          ) -> dict[str, Any]:
    run = document.RunData(records, FINGERPRINT, artifacts or [], "trainer")
    return document.build(run, "2026-01-01T00:00:00+00:00")


def compared(golden: dict[str, Any], records: list[dict[str, Any]],
             artifacts: list[tuple[str, Path]] | None = None,
             tolerance: Tolerance = BITWISE) -> tuple[dict[str, Any], list[Rename]]:
    view = under_golden_names(golden, built(records, artifacts), records)
    return compare(golden, view.document, tolerance, view.renamed_artifacts), view.renamed


def test_equal_values_are_paired_in_order_so_zeroed_biases_keep_their_places() -> None:
    golden = [Tensor("a.weight", "1"), Tensor("a.bias", "0"), Tensor("b.weight", "2"),
              Tensor("b.bias", "0")]
    run = [Tensor("x.weight", "1"), Tensor("x.bias", "0"), Tensor("y.weight", "2"),
           Tensor("y.bias", "0")]
    assert pair(golden, run) == [Rename("a.weight", "x.weight"), Rename("a.bias", "x.bias"),
                                 Rename("b.weight", "y.weight"), Rename("b.bias", "y.bias")]


def test_only_names_on_one_side_are_paired_and_only_with_the_same_shape_and_dtype() -> None:
    golden = [Tensor("kept", "1"), Tensor("old", "2", (2, 3), "float32")]
    assert pair(golden, [Tensor("kept", "1"), Tensor("new", "2", (3, 2), "float32")]) == []
    assert pair(golden, [Tensor("kept", "1"), Tensor("new", "2", (2, 3), "float16")]) == []
    # `old` is in run A too (with another value): a tensor of its value is not a rename of it.
    assert pair(golden, [Tensor("kept", "1"), Tensor("new", "2", (2, 3), "float32"),
                         Tensor("old", "9", (2, 3), "float32")]) == []
    assert pair(golden, [Tensor("kept", "1"), Tensor("new", "2", (2, 3), "float32")]) == [
        Rename("old", "new")]


def test_a_renamed_module_with_equal_values_is_the_same_and_lists_the_renames(
        tmp_path: Path) -> None:
    weight = np.arange(4, dtype=np.float32)
    statistics = np.array([0.5, 0.25], dtype=np.float32)
    golden = built(trajectory(FC), [checkpoint(tmp_path / "golden", {
        "fc.weight": weight, "fc.bias": np.zeros(1, np.float32),
        "norm.running_mean": statistics})])
    renamed = [checkpoint(tmp_path / "run", {
        "proj.weight": weight, "proj.bias": np.zeros(1, np.float32),
        "bn.running_mean": statistics})]

    result, renames = compared(golden, trajectory(PROJ), renamed)
    assert (result["status"], result["first_divergence"]) == (SAME, None)
    assert (result["steps_compared"], result["artifacts_compared"]) == (4, 1)
    # The parameters from the steps; the buffer, which no step records, from the checkpoint.
    assert renames == [Rename("fc.weight", "proj.weight"), Rename("fc.bias", "proj.bias"),
                       Rename("norm.running_mean", "bn.running_mean")]


def test_a_rename_with_a_later_change_is_changed_where_the_change_starts() -> None:
    golden = built(trajectory(FC))
    result, renames = compared(golden, trajectory(PROJ, loss_from=3))
    assert result["status"] == CHANGED
    assert (result["first_divergence"]["step"], result["first_divergence"]["cause"]) == (
        3, "forward")
    assert [rename.run for rename in renames] == ["proj.weight", "proj.bias"]


def test_a_rename_with_other_initial_values_is_changed_at_initialization() -> None:
    golden = built(trajectory(FC))
    other = ["w-other", "zero", "w-head", "zero"]
    result, renames = compared(golden, trajectory(PROJ, initial=other))
    assert result["status"] == CHANGED
    divergence = result["first_divergence"]
    assert (divergence["step"], divergence["cause"]) == (1, "initialization")
    assert "fc.weight" in divergence["detail"] and "proj.weight" in divergence["detail"]
    assert renames == [Rename("fc.bias", "proj.bias")]  # the zeroed bias alone is the same


def test_a_checkpoint_takes_the_parameters_renames_under_its_own_prefix(
        tmp_path: Path) -> None:
    weight = np.array([3.0, 4.0], dtype=np.float32)
    golden = built(trajectory(FC), [checkpoint(tmp_path / "golden", {
        "model.fc.weight": weight, "model.fc.bias": np.zeros(1, np.float32)})])
    moved = [checkpoint(tmp_path / "run", {
        "model.proj.weight": weight * np.float32(1.0001),
        "model.proj.bias": np.zeros(1, np.float32)})]

    bitwise, _ = compared(golden, trajectory(PROJ), moved)
    assert bitwise["status"] == CHANGED
    assert bitwise["first_divergence"]["detail"] == (
        "model.safetensors: tensor model.fc.weight differs")
    loose = Tolerance.from_config({"tensors": {"rtol": 1e-3, "atol": 0.0}})
    assert compared(golden, trajectory(PROJ), moved, loose)[0]["status"] == WITHIN_TOLERANCE


def test_equal_names_leave_the_run_as_it_is() -> None:
    records = trajectory(FC)
    candidate = built(records)
    view = under_golden_names(built(trajectory(FC, loss_from=2)), candidate, records)
    assert (view.document, view.renamed, view.renamed_artifacts) == (candidate, [], frozenset())
