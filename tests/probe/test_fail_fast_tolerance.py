"""Fail-fast under a tolerance (REPRO_GATE_FAIL_FAST_TOLERANCE): real trainings under the probe
against a reference trajectory, and the probe's reading of the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from repro_gate.probe import (
    ENV_FAIL_FAST_TOLERANCE,
    ENV_REFERENCE_TRAJECTORY,
    INJECT_DIR,
    STATUS_FILE,
    STOP_EXIT_CODE,
    probe_output_dir,
    read_json,
    read_trajectory,
)

STEPS = 5
NUDGED_STEP = 3
# A float64 training whose input at step 3 moves by 1e-9 when NUDGE is set (an upgraded package
# that changes a number by a hair): the loss moves from step 3 on, and the parameters with it.
TRAINING = f"""
import os
import torch

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, {STEPS + 1}):
    x = torch.randn(8, 4)
    if step == {NUDGED_STEP} and os.environ.get("NUDGE"):
        x = x + 1e-9
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("finished all steps")
"""


def train(run_dir: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The training as the gate runs it: the probe on PYTHONPATH, deterministic mode."""
    run_dir.mkdir(parents=True)
    script = run_dir / "train.py"
    script.write_text(TRAINING)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    env.update(PYTHONPATH=str(INJECT_DIR), PYTHONHASHSEED="0", REPRO_GATE_RUN_DIR=str(run_dir),
               REPRO_GATE_MODE="deterministic", REPRO_GATE_SEED="1234", **extra_env)
    return subprocess.run([sys.executable, str(script)], env=env, cwd=run_dir,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run A, not nudged: its probe directory is the reference trajectory."""
    run_dir = tmp_path_factory.mktemp("fail-fast") / "a"
    completed = train(run_dir, {})
    assert completed.returncode == 0, completed.stderr
    return probe_output_dir(run_dir)


def nudged(run_dir: Path, reference: Path, tolerance: str | None) -> dict[str, Any]:
    """Run B, nudged, failing fast against the reference; its exit code and status."""
    env = {ENV_REFERENCE_TRAJECTORY: str(reference), "NUDGE": "1"}
    if tolerance is not None:
        env[ENV_FAIL_FAST_TOLERANCE] = tolerance
    completed = train(run_dir, env)
    status = read_json(run_dir, STATUS_FILE)
    return {"exit": completed.returncode, "finished": "finished all steps" in completed.stdout,
            "stopped": status["stopped"], "stop_step": status["stop_step"],
            "steps": status["steps"], "errors": status["errors"]}


def test_the_nudge_moves_the_loss_by_a_hair_and_the_parameters(reference: Path,
                                                                tmp_path: Path) -> None:
    """What the tolerances below are measured against: the nudged run, not failing fast."""
    completed = train(tmp_path / "b", {"NUDGE": "1"})
    assert completed.returncode == 0, completed.stderr
    ours, theirs = read_trajectory(tmp_path / "b"), read_trajectory(reference.parent)
    assert len(ours) == len(theirs) == STEPS
    differences = [abs(float.fromhex(a["loss"]) - float.fromhex(b["loss"]))
                   for a, b in zip(ours, theirs, strict=True)]
    assert differences[:NUDGED_STEP - 1] == [0.0] * (NUDGED_STEP - 1)
    assert all(1e-12 < difference < 1e-6 for difference in differences[NUDGED_STEP - 1:])
    assert ours[NUDGED_STEP - 1]["params"] != theirs[NUDGED_STEP - 1]["params"]


def test_bitwise_fail_fast_stops_at_the_nudged_step(reference: Path, tmp_path: Path) -> None:
    assert nudged(tmp_path / "b", reference, None) == {
        "exit": STOP_EXIT_CODE, "finished": False, "stopped": "divergence",
        "stop_step": NUDGED_STEP, "steps": NUDGED_STEP, "errors": []}


def test_a_loose_tolerance_runs_to_the_end(reference: Path, tmp_path: Path) -> None:
    """The loss stays within 1e-6 and the parameters, which differ, are not compared."""
    assert nudged(tmp_path / "b", reference, '{"atol": 1e-6, "rtol": 0}') == {
        "exit": 0, "finished": True, "stopped": None, "stop_step": None, "steps": STEPS,
        "errors": []}


def test_a_tight_tolerance_stops_at_the_nudged_step(reference: Path, tmp_path: Path) -> None:
    assert nudged(tmp_path / "b", reference, '{"atol": 1e-12, "rtol": 0}') == {
        "exit": STOP_EXIT_CODE, "finished": False, "stopped": "divergence",
        "stop_step": NUDGED_STEP, "steps": NUDGED_STEP, "errors": []}


def test_a_malformed_tolerance_is_reported_and_fail_fast_is_bitwise(reference: Path,
                                                                    tmp_path: Path) -> None:
    result = nudged(tmp_path / "b", reference, '{"atol": "loose"}')
    assert (result["exit"], result["stopped"], result["stop_step"]) == (
        STOP_EXIT_CODE, "divergence", NUDGED_STEP)
    assert result["errors"] == [
        f'{ENV_FAIL_FAST_TOLERANCE}=\'{{"atol": "loose"}}\' is not {{"atol": x, "rtol": y}} '
        "with finite x, y >= 0: fail-fast is bitwise"]


# ----- the probe's side, imported in this process ----------------------------------------------


@pytest.fixture
def trajectory(probe_module: Callable[[str], ModuleType]) -> ModuleType:
    return probe_module("_repro_gate_trajectory")


@pytest.mark.parametrize("value", [
    "not json", "[1e-6, 0]", '{"atol": 1e-6}', '{"atol": 1e-6, "rtol": 0, "ulp": 1}',
    '{"atol": -1, "rtol": 0}', '{"atol": true, "rtol": 0}', '{"atol": 1e-6, "rtol": Infinity}',
    '{"atol": null, "rtol": 0}',
])
def test_a_malformed_value_is_one_error_and_bitwise(trajectory: ModuleType, value: str) -> None:
    errors: list[str] = []
    assert trajectory.loss_tolerance(value, errors.append) is None
    assert len(errors) == 1 and errors[0].startswith(f"{ENV_FAIL_FAST_TOLERANCE}={value!r}")


def test_a_well_formed_value(trajectory: ModuleType) -> None:
    errors: list[str] = []
    tolerance = trajectory.loss_tolerance('{"atol": 0, "rtol": 1e-3}', errors.append)
    assert (tolerance.atol, tolerance.rtol, errors) == (0.0, 1e-3, [])
    assert trajectory.loss_tolerance("", errors.append) is None
    assert trajectory.loss_tolerance(None, errors.append) is None
    assert errors == []


def write_reference(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_under_a_tolerance_only_the_loss_counts(trajectory: ModuleType, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_FAIL_FAST_TOLERANCE, '{"atol": 0, "rtol": 1e-3}')
    write_reference(tmp_path / "a.jsonl", [
        {"step": 1, "loss": (1.0).hex(), "params": {"w": "aa"}},
        {"step": 2, "loss": None, "params": {"w": "bb"}},
        {"step": 3, "loss": (2.0).hex(), "params": {"w": "cc"}},
        {"step": 4, "loss": float("nan").hex(), "params": {"w": "dd"}},
    ])
    errors: list[str] = []
    reference = trajectory.ReferenceTrajectory(str(tmp_path / "a.jsonl"), errors.append)

    def differs(step: int, loss: float | None) -> bool:
        hexed = None if loss is None else loss.hex()
        return reference.differs({"step": step, "loss": hexed, "params": {"w": "other"}})

    assert not differs(1, 1.0009)  # within rtol * |b|, and other parameters
    assert differs(1, 1.002)
    assert not differs(2, 5.0)  # no loss in the reference
    assert not differs(3, None)  # no loss in this run
    assert not differs(4, float("nan"))  # NaN agrees with NaN, as in the gate's tolerance
    assert differs(4, 1.0)
    assert not differs(5, 9.0)  # a step the reference does not have
    assert errors == []
