"""Blocks long enough to time: the probe lengthens the cost run's blocks of a quick training to
last `cost.block_seconds`, keeps the planned length for a slow one, ends the run at the end of
its plan, and the gate times the blocks the probe ran; end to end, through the real CLI.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

from helpers.gate_cli import TORCHRUN, check

from repro_gate import validation
from repro_gate.probe import COST_FILE, read_json, read_trajectories, read_trajectory

# A training that pauses `argv[1]` seconds in each step (its own optimizer pre-hook, so the pause
# is the step's time). Runs A and B train just long enough for the gate to start a cost run (it
# skips one that could not time 3 block pairs), which trains longer than any plan here.
TRAINING = """\
import os
import sys
import time

import torch
from tiny import run_dir_path, train
from torch.optim.optimizer import register_optimizer_step_pre_hook

torch.manual_seed(0)
pause = float(sys.argv[1])
if pause:
    register_optimizer_step_pre_hook(lambda optimizer, args, kwargs: time.sleep(pause))
cost_run = os.environ.get("REPRO_GATE_MODE") == "cost"
train(steps=4000 if cost_run else 30 if pause else 300, checkpoint=run_dir_path("model.pt"))
"""
# 5 warm-up steps (3 of them repeat an arm: the step time), 3 rounds of 2 blocks of >= 2 steps
DESIGN = ["--cost-warmup", "5", "--cost-blocks", "3", "--cost-block-steps", "2",
          "--cost-block-seconds", "0.02"]


def cost_run(manifest: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                dict[str, Any]]:
    """The cost run's manifest entry, its trajectory and the probe's COST_FILE."""
    run = next(r for r in manifest["runs"] if r["name"] == "cost")
    run_dir = Path(run["run_dir"])
    report = read_json(run_dir, COST_FILE)
    assert isinstance(report, dict)
    return run, read_trajectory(run_dir), report


def assert_blocks_of(steps: list[dict[str, Any]], length: int) -> None:
    """Six timed blocks of `length` steps each, after the 5 warm-up steps, alternating arms."""
    blocks = [s.get("block") for s in steps]
    assert blocks == [None] * 5 + [index for index in range(6) for _ in range(length)]
    arms = [steps[5 + index * length]["arm"] for index in range(6)]
    assert arms == ["default", "deterministic", "deterministic", "default",
                    "default", "deterministic"]


def test_the_probe_lengthens_the_blocks_of_a_quick_training(project: Path) -> None:
    # Its own gate: steps quick enough that the blocks are lengthened.
    (project / "pausing.py").write_text(TRAINING)
    result = check(project, *DESIGN, "--", sys.executable, "pausing.py", "0")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    run, steps, report = cost_run(manifest)
    length = report["block_steps"]
    # A step of the tiny training takes well under 10 ms: blocks of 2 steps are lengthened.
    assert (report["block_steps_planned"], report["errors"]) == (2, [])
    assert length > 2
    # The warm-up steps that repeat an arm (3, 4, 5) time a step; the blocks last 0.02 s.
    median = statistics.median(s["time"] for s in steps[2:5])
    assert abs(report["step_seconds"] - median) < 1e-9
    assert length == math.ceil(0.02 / report["step_seconds"])
    # The probe ends the run at the end of its plan, not at the training's 4000 steps.
    assert (run["steps"], run["stopped"]) == (5 + 6 * length, "max_steps")
    assert_blocks_of(steps, length)
    # The gate timed the blocks the probe ran: all 3 pairs.
    cost = manifest["cost"]
    assert cost["design"] == {"arms": ["deterministic", "default"], "block_steps": length,
                              "block_steps_planned": 2, "blocks": 3, "pairs": 3,
                              "warmup_steps": 5}
    assert len(cost["pair_pcts"]) == 3
    assert cost["status"] in ("measured", "inconclusive")
    low, high = cost["ci95_pct"]
    assert low <= cost["pct"] <= high


def test_the_probe_keeps_the_planned_blocks_of_a_slow_training(project: Path) -> None:
    # Its own gate: steps slow enough that the blocks keep their planned length.
    (project / "pausing.py").write_text(TRAINING)
    result = check(project, *DESIGN, "--", sys.executable, "pausing.py", "0.03")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    run, steps, report = cost_run(manifest)
    # 2 steps of more than 30 ms already last 0.02 s.
    assert report["step_seconds"] >= 0.03
    assert (report["block_steps"], report["block_steps_planned"]) == (2, 2)
    assert (run["steps"], run["stopped"]) == (5 + 6 * 2, "max_steps")
    assert_blocks_of(steps, 2)
    design = manifest["cost"]["design"]
    assert (design["block_steps"], design["block_steps_planned"], design["pairs"]) == (2, 2, 3)


def test_the_reference_cost_run_trains_as_written_and_says_it_is_too_short(
    project: Path,
) -> None:
    # Its own gate: the embedded reference training.
    # Like any training, the reference would train its own 6 steps in the cost run too: the
    # plan needs more, so the cost run is not started and the reason gives the design's numbers.
    result = check(project, "--steps", "6", *DESIGN)
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert [(r["name"], r["steps"]) for r in manifest["runs"]] == [("A", 6), ("B", 6)]
    cost = manifest["cost"]
    assert (cost["status"], cost.get("ci95_pct")) == ("inconclusive", None)
    assert cost["reason"].startswith("too short to time: 6 steps; 3 block pairs, the fewest"
                                     " for a figure, need at least "), cost
    assert cost["reason"].endswith(", so the cost run was not started")
    assert "too short to time: 6 steps" in result.stdout


DDP_TRAINING = """\
from ddp_tiny import torchrun_rank, train_rank

train_rank(*torchrun_rank(), steps=60)
"""


def test_ranks_of_a_process_group_keep_the_planned_blocks_and_stop_together(
    project: Path,
) -> None:
    # Its own gate: two ranks under torchrun.
    # Each rank would time its own steps and could plan another end: a rank that stopped first
    # would leave the others waiting in a collective. In a process group the plan stays as is.
    (project / "ddp_long.py").write_text(DDP_TRAINING)
    result = check(project, *DESIGN, "--", *TORCHRUN, "ddp_long.py")
    assert result.exit_code == 0, result.stdout + result.stderr
    run = next(r for r in result.manifest["runs"] if r["name"] == "cost")
    assert (run["steps"], run["stopped"], run["ranks"]) == (5 + 6 * 2, "max_steps", 2)
    run_dir = Path(run["run_dir"])
    assert {rank: len(steps) for rank, steps in read_trajectories(run_dir).items()} == {
        0: 17, 1: 17}
    for rank in (0, 1):
        report = read_json(run_dir, COST_FILE, rank)
        assert (report["block_steps"], report["block_steps_planned"]) == (2, 2)
        assert report["step_seconds"] is not None
    assert result.manifest["cost"]["design"]["pairs"] == 3
