"""Run A against its golden trajectory: step by step (bitwise, or the loss within a tolerance
with a number of steps allowed outside it), then artifact by artifact; the first divergent
step's cause, the largest difference and the loss deltas. Both sides are golden documents built
from step records and real safetensors files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from helpers.paths import ROOT
from safetensors.numpy import save_file

from repro_gate import validation
from repro_gate.golden import document
from repro_gate.golden.comparison import (
    CHANGED,
    MAX_DELTA_POINTS,
    SAME,
    WITHIN_TOLERANCE,
    Tolerance,
    compare,
    spread,
    within,
)

FINGERPRINT = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())[
    "fingerprint"]
BITWISE = Tolerance()
LOSS_TOLERANCE = Tolerance.from_config({"loss": {"rtol": 0.0, "atol": 1e-3, "steps_outside": 0}})


def record(step: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"step": step, "loss": (1.0).hex(), "inputs": f"i{step}",
                            "grads": {"w": f"g{step}"}, "params": {"w": f"p{step}"}}
    if step == 1:
        base["init"] = {"w": "w0"}
    return {**base, **changes}


def golden_of(records: list[dict[str, Any]],
              artifacts: list[tuple[str, Path]] | None = None) -> dict[str, Any]:
    run = document.RunData(records, FINGERPRINT, artifacts or [], "trainer")
    return document.build(run, "2026-01-01T00:00:00+00:00")


def steps(n: int = 4, **at: dict[str, Any]) -> list[dict[str, Any]]:
    """`n` records; `at={"3": {...}}` changes step 3 and every later one."""
    records = []
    changes: dict[str, Any] = {}
    for step in range(1, n + 1):
        changes = {**changes, **at.get(str(step), {})}
        records.append(record(step, **changes))
    return records


def test_an_identical_run_is_the_same() -> None:
    result = compare(golden_of(steps()), golden_of(steps()), BITWISE)
    assert result == {"status": SAME, "steps_compared": 4, "artifacts_compared": 0,
                      "first_divergence": None, "largest_difference": None,
                      "loss_delta": [{"step": n, "delta": 0.0} for n in range(1, 5)]}


def test_the_first_differing_record_of_the_step_is_the_cause() -> None:
    golden = golden_of(steps())
    cases = {"inputs": ("x", "input"), "grads": ({"w": "x"}, "backward"),
             "params": ({"w": "x"}, "optimizer")}
    for field, (value, cause) in cases.items():
        result = compare(golden, golden_of(steps(**{"3": {field: value}})), BITWISE)
        assert result["status"] == CHANGED
        assert (result["first_divergence"]["step"], result["first_divergence"]["cause"]) == (
            3, cause)
    forward = compare(golden, golden_of(steps(**{"2": {"loss": (1.5).hex()}})), BITWISE)
    assert forward["first_divergence"]["cause"] == "forward"
    assert forward["first_divergence"]["detail"] == (
        "loss 1.0 in the golden trajectory, 1.5 now")
    assert forward["largest_difference"] == {"what": "loss at step 2", "value": 0.5}


def test_other_initial_parameters_are_the_initialization() -> None:
    other_start = {"init": {"w": "other"}, "params": {"w": "x"}}
    result = compare(golden_of(steps()), golden_of(steps(**{"1": other_start})), BITWISE)
    assert result["first_divergence"]["step"] == 1
    assert (result["first_divergence"]["cause"], result["first_divergence"]["detail"]) == (
        "initialization", "initial parameters differ: w")


def test_a_loss_within_the_tolerance_is_within_tolerance_and_beyond_it_changed() -> None:
    golden = golden_of(steps())
    close = golden_of(steps(**{"3": {"loss": (1.0005).hex(), "params": {"w": "q"}}}))
    assert compare(golden, close, LOSS_TOLERANCE)["status"] == WITHIN_TOLERANCE
    assert compare(golden, close, BITWISE)["status"] == CHANGED
    far = golden_of(steps(**{"3": {"loss": (1.01).hex()}}))
    assert compare(golden, far, LOSS_TOLERANCE)["status"] == CHANGED
    allowed = Tolerance.from_config({"loss": {"atol": 1e-3, "steps_outside": 2}})
    assert compare(golden, far, allowed)["status"] == WITHIN_TOLERANCE  # steps 3 and 4 outside


def test_a_run_of_another_length_is_changed() -> None:
    result = compare(golden_of(steps(4)), golden_of(steps(3)), LOSS_TOLERANCE)
    assert (result["status"], result["steps_compared"]) == (CHANGED, 3)
    assert result["first_divergence"] == {
        "step": 4, "cause": "unknown",
        "detail": "the run recorded 3 steps, the golden trajectory 4"}


def checkpoint(tmp_path: Path, name: str, weight: np.ndarray) -> tuple[str, Path]:
    path = tmp_path / name / "model.safetensors"
    path.parent.mkdir()
    save_file({"w": weight}, str(path))
    return ("model.safetensors", path)


def test_a_checkpoint_within_the_tensor_tolerance_is_within_tolerance(tmp_path: Path) -> None:
    weight = np.array([3.0, 4.0], dtype=np.float32)
    golden = golden_of(steps(), [checkpoint(tmp_path, "g", weight)])
    run = golden_of(steps(), [checkpoint(tmp_path, "r", weight * np.float32(1.0001))])
    assert compare(golden, golden_of(steps(), [checkpoint(tmp_path, "s", weight)]), BITWISE)[
        "status"] == SAME
    bitwise = compare(golden, run, BITWISE)
    assert (bitwise["status"], bitwise["artifacts_compared"]) == (CHANGED, 1)
    assert bitwise["first_divergence"]["detail"] == "model.safetensors: tensor w differs"
    assert bitwise["largest_difference"]["what"] == "norm of model.safetensors:w"
    assert abs(bitwise["largest_difference"]["value"] - 5.0 * 1e-4) < 1e-6
    loose = Tolerance.from_config({"tensors": {"rtol": 1e-3, "atol": 0.0}})
    assert compare(golden, run, loose)["status"] == WITHIN_TOLERANCE


def test_an_artifact_on_one_side_only_is_changed(tmp_path: Path) -> None:
    golden = golden_of(steps(), [checkpoint(tmp_path, "g", np.ones(2, np.float32))])
    result = compare(golden, golden_of(steps()), BITWISE)
    assert (result["status"], result["artifacts_compared"]) == (CHANGED, 0)
    assert result["first_divergence"]["detail"] == (
        "model.safetensors is in the golden trajectory, not in run A")
    reverse = compare(golden_of(steps()), golden, BITWISE)
    assert reverse["first_divergence"]["detail"] == (
        "model.safetensors is in run A, not in the golden trajectory")


def test_the_loss_deltas_are_spread_over_at_most_a_hundred_points() -> None:
    deltas = [{"step": n, "delta": float(n)} for n in range(1, 1001)]
    kept = spread(deltas)
    assert len(kept) == MAX_DELTA_POINTS
    assert (kept[0], kept[-1]) == (deltas[0], deltas[-1])
    assert spread(deltas[:50]) == deltas[:50]


def test_within_is_measured_against_the_golden_value() -> None:
    assert within(1.5, 1.0, {"rtol": 0.5})
    assert not within(1.0, 0.5, {"rtol": 0.5})  # 0.5 > 0.5 * |0.5|
    assert within(1.0, 0.5, {"rtol": 0.5, "atol": 0.25})
    assert within(5.0, 5.0, {})
    assert Tolerance.from_config(None) == Tolerance()


def test_a_renamed_checkpoint_with_equal_tensors_is_the_same_whatever_its_bytes(
        tmp_path: Path) -> None:
    files = []
    for name, note in (("g", "golden"), ("r", "run")):  # other bytes, the same tensors
        path = tmp_path / name / "model.safetensors"
        path.parent.mkdir()
        save_file({"w": np.ones(2, np.float32)}, str(path), metadata={"note": note})
        files.append(("model.safetensors", path))
    golden, run = golden_of(steps(), files[:1]), golden_of(steps(), files[1:])
    assert compare(golden, run, BITWISE)["first_divergence"]["detail"] == (
        "model.safetensors differs from the golden file's (sha256)")
    renamed = compare(golden, run, BITWISE, frozenset({"model.safetensors"}))
    assert (renamed["status"], renamed["artifacts_compared"]) == (SAME, 1)


def test_buffers_alone_differing_are_the_cause_buffers_and_a_rename_keeps_them() -> None:
    golden = golden_of(steps(**{"1": {"buffers": {"bn.running_mean": "m1"}}}))
    changed = compare(golden, golden_of(steps(**{
        "1": {"buffers": {"bn.running_mean": "m1"}},
        "3": {"buffers": {"bn.running_mean": "m3"}}})), BITWISE)
    assert changed["status"] == CHANGED
    assert changed["first_divergence"] == {
        "step": 3, "cause": "buffers",
        "detail": "the model's buffers differ (the loss and what comes before are equal)"}
    # Digested by value in model order: the same values under new names are the same.
    renamed = golden_of(steps(**{"1": {"buffers": {"norm.running_mean": "m1"}}}))
    assert compare(golden, renamed, BITWISE)["status"] == SAME


def test_a_format_1_golden_file_is_read_as_it_is_with_no_buffers_compared() -> None:
    run = golden_of(steps(**{"1": {"buffers": {"bn.running_mean": "m1"}}}))
    assert run["format"] == 2 and len(run["steps"][0]) == 7
    older = {**run, "format": 1, "steps": [row[:6] for row in run["steps"]]}
    assert validation.errors("golden", older) == validation.errors("golden", run) == []
    assert compare(older, run, BITWISE)["status"] == SAME
