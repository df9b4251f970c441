"""`repro-gate calibrate` as a user runs it, on the tiny real trainings: the spread of N
default-mode runs in calibration.json, and the golden.tolerance it suggests, printed as YAML."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from helpers.check_jsonschema import CHECK_JSONSCHEMA, OFFLINE
from helpers.paths import ROOT, TRAININGS


def calibrate(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    return subprocess.run([sys.executable, "-m", "repro_gate", "calibrate", "--quiet", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=240)


def training(tmp_path: Path, name: str) -> list[str]:
    for file in ("tiny.py", name):
        shutil.copy(TRAININGS / file, tmp_path / file)
    return ["--artifacts", "model.pt", "--", sys.executable, name]


def suggestion(stdout: str) -> dict:
    """The printed YAML, with exactly the keys of `golden.tolerance`."""
    tolerance = yaml.safe_load(stdout)["golden"]["tolerance"]
    assert set(tolerance) == {"loss", "tensors"}
    assert set(tolerance["loss"]) == {"rtol", "atol", "steps_outside"}
    assert set(tolerance["tensors"]) == {"rtol", "atol"}
    for bounds in tolerance.values():
        assert all(isinstance(value, (int, float)) for value in bounds.values()), bounds
    return tolerance


def test_unseeded_runs_spread_and_the_suggestion_covers_it_with_a_margin(tmp_path: Path) -> None:
    result = calibrate(tmp_path, "--samples", "2", *training(tmp_path, "unseeded.py"))
    assert result.returncode == 0, result.stderr
    path = tmp_path / "repro-gate-out" / "calibration.json"
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--schemafile", "schemas/calibration.schema.json",
         str(path)],
        cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(path.read_text())
    assert document["samples"] == 2 and len(document["runs"]) == 2
    assert document["steps_compared"] == 6
    # Unseeded: every run starts from other weights, so every step's loss differs.
    assert all(step["max_abs_difference"] > 0 for step in document["loss"])
    assert {t["name"] for t in document["tensors"]} == {
        "encoder.weight", "encoder.bias", "head.weight", "head.bias"}
    tolerance = suggestion(result.stdout)
    largest_loss = max(step["max_abs_difference"] for step in document["loss"])
    largest_rel = max(step["max_rel_difference"] for step in document["loss"])
    assert tolerance["loss"]["atol"] >= 2 * largest_loss > 0
    assert tolerance["loss"]["rtol"] >= 2 * largest_rel > 0
    assert tolerance["loss"]["steps_outside"] == 0
    largest_tensor = max(t["max_abs_difference"] for t in document["tensors"])
    assert tolerance["tensors"]["atol"] >= 2 * largest_tensor > 0
    assert document["suggestion"] == tolerance


def test_a_self_seeded_training_agrees_bitwise_over_three_samples(tmp_path: Path) -> None:
    result = calibrate(tmp_path, "--samples", "3", *training(tmp_path, "deterministic.py"))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "repro-gate-out" / "calibration.json").read_text())
    assert [run["name"] for run in document["runs"]] == [
        "calibrate-1", "calibrate-2", "calibrate-3"]
    assert all(step["max_abs_difference"] == 0 for step in document["loss"])
    assert all(len(t["norm"]) == 3 for t in document["tensors"])
    assert suggestion(result.stdout) == {"loss": {"rtol": 0, "atol": 0, "steps_outside": 0},
                                         "tensors": {"rtol": 0, "atol": 0}}


def test_one_sample_is_refused_in_one_line(tmp_path: Path) -> None:
    result = calibrate(tmp_path, "--samples", "1", "--", sys.executable, "missing.py")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "repro-gate: error: --samples must be at least 2 (a spread needs two runs), got 1"]
    assert not (tmp_path / "repro-gate-out").exists()
