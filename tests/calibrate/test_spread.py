"""How N runs of one training differ: per step the spread of the loss, per tensor of every
checkpoint all runs wrote the spread of its norm and largest absolute value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from repro_gate.calibrate.spread import difference, loss_spread, loss_values, tensor_spread


def test_the_difference_is_max_minus_min_and_relative_to_the_largest_magnitude() -> None:
    assert difference([1.0, 1.5, 1.25]) == (0.5, 0.5 / 1.5)
    assert difference([-2.0, 1.0]) == (3.0, 1.5)
    assert difference([0.0, 0.0]) == (0.0, 0.0)


def test_only_finite_losses_of_numbered_steps_are_read() -> None:
    trajectory = [{"step": 1, "loss": (0.5).hex()}, {"step": 2, "loss": float("inf").hex()},
                  {"step": 3, "loss": "nan"}, {"step": 4, "loss": "not hex"},
                  {"step": 5}, {"step": "6", "loss": (1.0).hex()}, {"step": 7, "loss": 0.25}]
    assert loss_values(trajectory) == {1: 0.5}


def test_the_loss_spreads_over_the_steps_every_run_recorded() -> None:
    runs = [[{"step": 1, "loss": (1.0).hex()}, {"step": 2, "loss": (0.5).hex()}],
            [{"step": 1, "loss": (1.25).hex()}, {"step": 2, "loss": (0.5).hex()},
             {"step": 3, "loss": (0.1).hex()}],
            [{"step": 1, "loss": (1.0).hex()}, {"step": 2, "loss": (0.75).hex()}]]
    assert loss_spread(runs) == [
        {"step": 1, "min": 1.0, "max": 1.25, "max_abs_difference": 0.25,
         "max_rel_difference": 0.2},
        {"step": 2, "min": 0.5, "max": 0.75, "max_abs_difference": 0.25,
         "max_rel_difference": 0.25 / 0.75}]
    assert loss_spread([]) == []


def checkpoints(tmp_path: Path, *weights: dict[str, np.ndarray]) -> list[dict[str, Path]]:
    runs = []
    for index, tensors in enumerate(weights):
        path = tmp_path / f"run{index}" / "model.safetensors"
        path.parent.mkdir()
        save_file(tensors, str(path))
        runs.append({"model.safetensors": path})
    return runs


def test_each_floating_tensor_spreads_by_its_norm_and_max_abs(tmp_path: Path) -> None:
    runs = checkpoints(
        tmp_path,
        {"w": np.array([3.0, 4.0], np.float32), "steps": np.array([1], np.int64)},
        {"w": np.array([3.0, -4.5], np.float32), "steps": np.array([1], np.int64)})
    spread, skipped = tensor_spread(runs)
    assert skipped == []
    (tensor,) = spread  # the integer tensor has no spread to measure
    assert (tensor["artifact"], tensor["name"]) == ("model.safetensors", "w")
    assert tensor["max_abs"] == [4.0, 4.5]
    assert tensor["norm"][0] == 5.0
    norm_b = float(np.hypot(3.0, 4.5))
    assert tensor["max_abs_difference"] == pytest.approx(max(norm_b - 5.0, 0.5))
    assert tensor["max_rel_difference"] == pytest.approx(max((norm_b - 5.0) / norm_b, 0.5 / 4.5))


def test_tensors_not_in_every_run_and_non_finite_ones_are_left_out(tmp_path: Path) -> None:
    runs = checkpoints(
        tmp_path,
        {"w": np.ones(2, np.float32), "extra": np.ones(1, np.float32),
         "bad": np.array([np.nan], np.float32)},
        {"w": np.ones(2, np.float32), "bad": np.array([1.0], np.float32)})
    spread, _ = tensor_spread(runs)
    assert [t["name"] for t in spread] == ["w"]
    assert spread[0]["max_abs_difference"] == 0.0


def test_artifacts_that_are_no_readable_checkpoint_are_left_out_with_why(tmp_path: Path) -> None:
    runs: list[dict[str, Path]] = [{}, {}]
    for index, run in enumerate(runs):
        (tmp_path / f"r{index}").mkdir()
        for name, text in (("metrics.json", "{}"), ("model.pt", "not a checkpoint")):
            run[name] = tmp_path / f"r{index}" / name
            run[name].write_text(text)
    runs[0]["only_here.safetensors"] = tmp_path / "r0" / "only_here.safetensors"
    spread, skipped = tensor_spread(runs)
    assert spread == []
    assert skipped[0] == "metrics.json: not a checkpoint"
    assert skipped[1].startswith("model.pt: cannot read checkpoint model.pt from run calibration")
    assert len(skipped) == 2  # a file only one run wrote is not compared at all
