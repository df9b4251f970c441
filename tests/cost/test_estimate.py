"""The cost of determinism: the cost run's design, its estimate and interval over block pairs,
the status, the budget and the breakdown, on constructed step records and end to end.

The constructed trajectories are what the probe writes in the cost run: one line per step with
its "time", "arm" and, in the timed blocks, "block" (the probe's side is the end-to-end test).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.gate_cli import check
from helpers.paths import MANIFEST_FAIL

from repro_gate import validation
from repro_gate.config import CostConfig
from repro_gate.config.overrides import from_action_inputs
from repro_gate.cost.estimate import (
    MIN_PAIRS,
    T_975,
    block_times,
    budget,
    cost_of_determinism,
    estimate,
    fewest_steps,
    not_started,
    shortest_blocks,
    t_975,
    top_ops,
)
from repro_gate.cost.plan import (
    ARM_DEFAULT,
    ARM_DETERMINISTIC,
    ARM_NO_FILL,
    CostPlan,
    plan,
)
from repro_gate.errors import ConfigError
from repro_gate.probe import read_trajectory

MANIFEST = MANIFEST_FAIL
SLOWDOWN = {ARM_DEFAULT: 1.0, ARM_NO_FILL: 1.2, ARM_DETERMINISTIC: 1.26}  # +20%, then +5%

StepTime = Callable[[str, int], float]


def trajectory(design: CostPlan, step_time: StepTime, steps: int | None = None
               ) -> list[dict[str, Any]]:
    """The rank 0 trajectory of a cost run following `design`: `step_time(arm, step)`."""
    records = []
    for step in range(1, (design.steps if steps is None else steps) + 1):
        index = step - len(design.warmup) - 1
        if step <= len(design.warmup):
            arm, block = design.warmup[step - 1], None
        elif index // design.block_steps < len(design.blocks):
            block = index // design.block_steps
            arm = design.blocks[block]
        else:
            arm, block = design.census[index // design.block_steps - len(design.blocks)], None
        record: dict[str, Any] = {"step": step, "time": step_time(arm, step), "arm": arm}
        if block is not None:
            record["block"] = block
        records.append(record)
    return records


def drifting(speedup: float, total: int, noise: float = 0.0) -> StepTime:
    """Step times of a machine that gets `speedup` times faster over `total` steps, with an
    alternating relative noise (deterministic, so the tests are)."""
    def step_time(arm: str, step: int) -> float:
        machine = 0.1 * speedup ** (-(step - 1) / total)
        wobble = 1 + noise * (1 if (step * 7919) % 3 else -1)
        return machine * SLOWDOWN[arm] * wobble
    return step_time


def valid(cost: dict[str, Any]) -> list[str]:
    document = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return validation.errors("manifest", {**document, "cost": cost})


# --- the interval --------------------------------------------------------------------------------

def test_student_t_quantiles_and_the_interval_on_the_log_scale() -> None:
    assert abs(t_975(31) - 2.0395) < 1e-3  # the expansion beyond the table
    assert abs(t_975(30) - T_975[-1]) < 1e-3
    assert abs(t_975(200) - 1.9719) < 1e-3
    # units 0.1, 0.2, 0.3: mean 0.2, sd 0.1, half-width t(2) x 0.1 / sqrt(3)
    result = estimate([0.1, 0.2, 0.3])
    half = 4.303 * 0.1 / math.sqrt(3)
    assert result.pct == round(math.expm1(0.2) * 100, 2)
    assert result.ci95_pct == [round(math.expm1(0.2 - half) * 100, 2),
                               round(math.expm1(0.2 + half) * 100, 2)]
    assert estimate([0.1]).ci95_pct is None and estimate([]).pct is None
    assert estimate([0.1, 0.3]).ci95_pct is None  # two pairs: t(1) = 12.7, no interval


def test_a_drifting_machine_cancels_out_and_is_measured() -> None:
    config = CostConfig(warmup=2, block_steps=4, blocks=6)
    design = plan(config)
    # The machine doubles its speed within the run (runs started at its two ends would differ
    # by 2x): the order reversed every other round cancels it from the estimate; it only
    # widens the interval, through the units' alternating bias.
    cost = cost_of_determinism(trajectory(design, drifting(2.0, design.steps)), design, config)
    assert cost["status"] == "measured" and "reason" not in cost
    assert cost["basis"] == "blocks"
    assert cost["design"] == {"arms": ["deterministic", "default"], "block_steps": 4,
                              "block_steps_planned": 4, "blocks": 6, "pairs": 6,
                              "warmup_steps": 2}
    low, high = cost["ci95_pct"]
    assert low <= 26.0 <= high and high - low < 20
    assert abs(cost["pct"] - 26.0) < 0.01
    assert len(cost["pair_pcts"]) == 6
    assert cost["det_step_seconds"] > cost["default_step_seconds"]
    assert "CUBLAS_WORKSPACE_CONFIG" in cost["note"]
    assert valid(dict(cost)) == []


def test_a_noisy_machine_gives_a_wide_interval_and_is_inconclusive() -> None:
    config = CostConfig(warmup=0, block_steps=1, blocks=6, max_width_pct=20)
    design = plan(config)
    cost = cost_of_determinism(trajectory(design, drifting(1.0, 1, noise=0.4)), design, config)
    assert cost["status"] == "inconclusive"
    width = cost["ci95_pct"][1] - cost["ci95_pct"][0]
    assert width > 20
    assert cost["reason"] == (f"the 95% interval is {width:.1f} percentage points wide"
                              " (limit 20): the machine's speed varied too much")
    assert valid(dict(cost)) == []


def test_a_training_too_short_for_the_blocks_is_inconclusive_not_an_error() -> None:
    config = CostConfig(warmup=3, block_steps=4, blocks=6)
    design = plan(config)
    steps = 3 + 2 * 8 + 3  # two complete rounds, the third cut short
    cost = cost_of_determinism(trajectory(design, drifting(1.0, 1), steps), design, config)
    assert cost["status"] == "inconclusive"
    assert cost["design"]["pairs"] == 2 < MIN_PAIRS
    assert cost["reason"] == (
        "too short to time: 22 steps, the design needs 51 (3 warm-up + 6 x 2 blocks of 4);"
        " 3 block pairs, the fewest for a figure, need 27")
    assert cost["pct"] is not None  # kept, but never to be shown alone
    assert cost["ci95_pct"] is None  # from two pairs an interval means nothing
    assert valid(dict(cost)) == []


def test_the_gate_times_the_blocks_the_probe_lengthened() -> None:
    config = CostConfig(warmup=3, block_steps=4, blocks=6)
    lengthened = dataclasses.replace(plan(config), block_steps=10)  # as the probe ran it
    records = trajectory(lengthened, drifting(1.0, 1))
    report = {"unavailable": [], "errors": [], "census": {}, "block_steps": 10,
              "block_steps_planned": 4, "step_seconds": 0.1}
    cost = cost_of_determinism(records, plan(config), config, report)
    assert (cost["design"]["block_steps"], cost["design"]["block_steps_planned"]) == (10, 4)
    assert cost["design"]["pairs"] == 6 and abs(cost["pct"] - 26.0) < 0.01
    assert valid(dict(cost)) == []
    assert "stopped_after_pairs" not in cost["design"]
    stopped = cost_of_determinism(records, plan(config), config,
                                  {**report, "stopped_after_pairs": 6})
    assert stopped["design"]["stopped_after_pairs"] == 6 and valid(dict(stopped)) == []
    # Without the probe's word the gate falls back to the plan's blocks, which match none.
    assert cost_of_determinism(records, plan(config), config)["design"]["pairs"] == 0
    # A training that ends early says how long the lengthened design is.
    short = cost_of_determinism(records[:3 + 2 * 20 + 5], plan(config), config, report)
    assert short["reason"] == (
        "too short to time: 48 steps, the design needs 123 (3 warm-up + 6 x 2 blocks of 10,"
        " lengthened from 4 to last 0.25 s); 3 block pairs, the fewest for a figure, need 63")


def test_without_any_step_nothing_is_timed() -> None:
    config = CostConfig()
    cost = cost_of_determinism([], plan(config), config)
    assert (cost["status"], cost["basis"], cost["pct"], cost["ci95_pct"]) == (
        "inconclusive", "wall", None, None)
    assert cost["reason"] == "no optimizer step was seen, so no block could be timed"
    assert valid(dict(cost)) == []


def test_a_probe_that_could_not_switch_says_so() -> None:
    config = CostConfig()
    steps = [{"step": 1, "time": 0.1}, {"step": 2, "time": 0.1}]
    report = {"errors": ["step 1: RuntimeError('no')"], "unavailable": [], "census": {}}
    cost = cost_of_determinism(steps, plan(config), config, report)
    assert cost["reason"] == ("too few block pairs were timed (0, 3 needed): the probe could not"
                              " switch the determinism knobs (step 1: RuntimeError('no'))")


def test_an_accelerator_block_is_timed_by_its_total_including_the_drain() -> None:
    steps = [{"step": 1, "time": 0.01, "arm": "default", "block": 0},
             {"step": 2, "time": 0.01, "arm": "default", "block": 0},
             {"step": 3, "time": 0.01, "arm": "default", "block": 0, "drain": 0.27},
             {"step": 4, "time": 0.5, "arm": "deterministic", "block": 1},
             {"step": 5, "time": 0.1, "arm": "deterministic", "block": 1},
             {"step": 6, "time": 0.2, "arm": "deterministic", "block": 1}]
    assert block_times(steps, 3) == {0: ("default", pytest.approx(0.1)),
                                     1: ("deterministic", 0.2)}  # median without a drain
    assert block_times(steps, 4) == {}  # incomplete blocks are left out


# --- the budget ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("status", "interval", "expected"),
    [
        ("measured", [12.0, 18.0], "over"),  # the whole interval lies above 10
        ("measured", [2.0, 8.0], "within"),  # ... below 10
        ("measured", [6.0, 14.0], "inconclusive"),  # it straddles the budget
        ("measured", [10.0, 14.0], "inconclusive"),  # touching is not above
        ("inconclusive", [30.0, 90.0], "inconclusive"),  # an inconclusive cost never fails
        ("measured", None, "inconclusive"),
    ],
)
def test_the_budget_is_over_only_when_the_whole_interval_lies_above(
    status: Any, interval: list[float] | None, expected: str
) -> None:
    assert budget(status, interval, 10.0) == {"max_pct": 10.0, "status": expected}


def test_the_cost_section_carries_its_budget() -> None:
    config = CostConfig(warmup=2, block_steps=4, blocks=6, max_pct=10)
    design = plan(config)
    cost = cost_of_determinism(trajectory(design, drifting(2.0, design.steps)), design, config)
    assert cost["budget"] == {"max_pct": 10.0, "status": "over"}
    assert valid(dict(cost)) == []
    assert "budget" not in cost_of_determinism([], design, CostConfig())


# --- the breakdown -------------------------------------------------------------------------------

def test_the_breakdown_splits_the_cost_over_its_own_pairs() -> None:
    config = CostConfig(warmup=3, block_steps=4, blocks=6, breakdown=True)
    design = plan(config)
    census = {"deterministic": {"aten::index_add_": 2.0, "aten::addmm": 1.0, "aten::mul": 0.5},
              "default": {"aten::index_add_": 0.5, "aten::addmm": 1.0, "aten::mul": 0.1}}
    report = {"unavailable": [], "errors": [], "census": census}
    records = trajectory(design, drifting(1.5, design.steps))
    cost = cost_of_determinism(records, design, config, report)
    assert cost["status"] == "measured"
    assert abs(cost["pct"] - 26.0) < 0.5
    fill = cost["breakdown"]["fill_uninitialized_memory"]
    kernels = cost["breakdown"]["deterministic_kernels"]
    assert (fill["pairs"], kernels["pairs"]) == (6, 6)
    assert abs(fill["pct"] - 5.0) < 0.5 and abs(kernels["pct"] - 20.0) < 0.5
    assert fill["ci95_pct"][0] <= fill["pct"] <= fill["ci95_pct"][1]
    assert cost["ops"] == [
        {"name": "aten::index_add_", "det_ms": 2.0, "default_ms": 0.5},
        {"name": "aten::mul", "det_ms": 0.5, "default_ms": 0.1},
    ]
    assert valid(dict(cost)) == []


def test_a_torch_without_the_fill_knob_gets_no_breakdown_figures() -> None:
    config = CostConfig(warmup=3, block_steps=4, blocks=6, breakdown=True)
    design = plan(config)
    report = {"unavailable": ["deterministic_no_fill"], "errors": [], "census": {}}
    cost = cost_of_determinism(trajectory(design, drifting(1.0, 1)), design, config, report)
    assert cost["breakdown"]["fill_uninitialized_memory"] == {
        "pct": None, "ci95_pct": None, "pairs": 0}
    assert "fill_uninitialized_memory" in cost["breakdown"]["reason"]
    assert cost["ops"] == []
    assert valid(dict(cost)) == []


def test_ops_need_both_census_blocks() -> None:
    assert top_ops({"deterministic": {"aten::sum": 1.0}}) == []
    assert top_ops(None) == []


# --- configuration -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cost-blocks", "2"], "cost.blocks: must be an integer from 3 to 100"),
        (["--cost-blocks", "101"], "cost.blocks: must be an integer from 3 to 100"),
        (["--cost-block-steps", "0"], "cost.block_steps: must be an integer from 1 to 100"),
        (["--cost-max-width", "0"], "cost.max_width_pct: must be a number > 0"),
        (["--cost-max-pct", "-1"], "cost.max_pct: must be a number >= 0"),
        (["--cost-block-seconds", "-1"], "cost.block_seconds: must be a number from 0 to 60"),
        (["--cost-block-seconds", "61"], "cost.block_seconds: must be a number from 0 to 60"),
        (["--cost-max-pct", "nan"], "cost.max_pct: must be a finite number >= 0, got nan"),
    ],
)
def test_bad_cost_settings_are_one_line_errors(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    result = check(tmp_path, *flags, "--", sys.executable, "train.py")
    assert result.exit_code == 2
    assert result.stderr == f"repro-gate: error: configuration: {message}\n"


def test_cost_action_inputs() -> None:
    inputs = {"INPUT_COST-MAX-PCT": "10", "INPUT_COST-BLOCKS": "8",
              "INPUT_COST-BREAKDOWN": "True"}
    assert from_action_inputs(inputs) == {"cost": {"max_pct": 10.0, "blocks": 8,
                                                   "breakdown": True}}
    assert from_action_inputs({"INPUT_COST-BREAKDOWN": "false"}) == {"cost": {"breakdown": False}}
    assert from_action_inputs({"INPUT_COST-BLOCK-SECONDS": "0.5"}) == {
        "cost": {"block_seconds": 0.5}}
    with pytest.raises(ConfigError, match="input cost-breakdown: must be true or false, got 'y'"):
        from_action_inputs({"INPUT_COST-BREAKDOWN": "y"})
    with pytest.raises(ConfigError, match="input cost-max-pct: must be a number, got 'ten'"):
        from_action_inputs({"INPUT_COST-MAX-PCT": "ten"})


# --- end to end ----------------------------------------------------------------------------------

TRAINING = """\
import json
import sys

import torch
import torch.utils.deterministic
from tiny import run_dir_path, train
from torch.optim.optimizer import register_optimizer_step_pre_hook

torch.backends.cudnn.benchmark = True  # the training's own setting: the default arm keeps it
seen = []


def note_knobs(optimizer, args, kwargs):
    # The knobs each step runs with, written at every step: the probe may stop the run.
    seen.append([torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
                 torch.utils.deterministic.fill_uninitialized_memory])
    with open(run_dir_path("knobs.json"), "w") as handle:
        json.dump(seen, handle)


register_optimizer_step_pre_hook(note_knobs)
torch.manual_seed(1234)
train(steps=int(sys.argv[1]), checkpoint=run_dir_path("model.pt"))
"""
# (deterministic algorithms, cudnn.benchmark, fill_uninitialized_memory) in each arm
KNOBS = {"default": [False, True, True], "deterministic": [True, False, True],
         "deterministic_no_fill": [True, False, False]}
SMALL_DESIGN = ["--cost-warmup", "1", "--cost-block-steps", "2", "--cost-blocks", "3"]


def test_check_measures_in_one_cost_run_that_alternates_its_arms(project: Path) -> None:
    (project / "long.py").write_text(TRAINING)
    result = check(project, *SMALL_DESIGN, "--cost-breakdown", "--cost-max-pct", "1000",
                   "--", sys.executable, "long.py", "40")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert [(r["name"], r["mode"]) for r in manifest["runs"]] == [
        ("A", "deterministic"), ("B", "deterministic"), ("cost", "cost")]
    cost_run = manifest["runs"][2]
    # 1 warm-up step, 3 rounds of 3 arms x 2 steps, 2 census blocks of 2: then the probe stops it.
    assert (cost_run["steps"], cost_run["stopped"]) == (1 + 18 + 4, "max_steps")
    steps = read_trajectory(Path(cost_run["run_dir"]))
    arms = [(s["arm"], s.get("block"), s.get("census", False)) for s in steps]
    forward = ["default", "deterministic_no_fill", "deterministic"]
    blocks = [*forward, *forward[::-1], *forward]
    assert arms == [("default", None, False),
                    *[(arm, index, False) for index, arm in enumerate(blocks) for _ in range(2)],
                    *[(arm, None, True) for arm in ("deterministic", "deterministic")],
                    *[(arm, None, True) for arm in ("default", "default")]]
    # The knobs follow the arms, and the default arm keeps the training's own settings.
    knobs = json.loads((Path(cost_run["run_dir"]) / "knobs.json").read_text())
    assert knobs == [KNOBS[step["arm"]] for step in steps]
    cost = manifest["cost"]
    assert cost["basis"] == "blocks"
    assert cost["design"] == {"arms": ["deterministic", "deterministic_no_fill", "default"],
                              "block_steps": 2, "block_steps_planned": 2, "blocks": 3,
                              "pairs": 3, "warmup_steps": 1}
    assert cost["status"] in ("measured", "inconclusive")
    assert ("reason" in cost) == (cost["status"] == "inconclusive")
    low, high = cost["ci95_pct"]
    assert low <= cost["pct"] <= high
    assert cost["budget"] == {
        "max_pct": 1000.0, "status": "within" if cost["status"] == "measured" else "inconclusive"}
    assert {part["pairs"] for part in cost["breakdown"].values()} == {3}
    assert cost["ops"], "the census named no op"
    assert all(op["det_ms"] > op["default_ms"] for op in cost["ops"])


def test_a_training_too_short_for_three_pairs_gets_its_reason_without_a_cost_run() -> None:
    config = CostConfig(warmup=3, blocks=6, block_steps=4)
    design = plan(config)

    assert fewest_steps(design) == 3 + 3 * 2 * 4
    cost = not_started(22, design, config)

    assert (cost["status"], cost["basis"], cost["pct"], cost["design"]["pairs"]) == (
        "inconclusive", "blocks", None, 0)
    assert cost["reason"] == (
        "too short to time: 22 steps; 3 block pairs, the fewest for a figure, need at least 27"
        " (3 warm-up + 3 x 2 blocks of 4), so the cost run was not started")


def test_blocks_are_predicted_as_short_as_the_probe_could_make_them() -> None:
    config = CostConfig(warmup=3, blocks=6, block_steps=4, block_seconds=0.25)
    design = plan(config)

    # Steps of 5 ms in run A: blocks of 0.25 s at twice that time, 25 steps.
    shortest = shortest_blocks(design, 0.005)
    assert (shortest.block_steps, fewest_steps(shortest)) == (25, 3 + 3 * 2 * 25)
    assert shortest_blocks(design, 1.0).block_steps == 4  # never shorter than planned
    assert shortest_blocks(design, None) == design
    one_warmup_step = plan(dataclasses.replace(config, warmup=1))  # no step the probe times
    assert shortest_blocks(one_warmup_step, 0.005) == one_warmup_step
    cost = not_started(80, shortest, config)
    assert cost["reason"] == (
        "too short to time: 80 steps; 3 block pairs, the fewest for a figure, need at least 153"
        " (3 warm-up + 3 x 2 blocks of 25 steps or more, to last 0.25 s at half run A's speed),"
        " so the cost run was not started")
    assert (cost["design"]["block_steps"], cost["design"]["block_steps_planned"]) == (25, 4)


def test_a_training_shorter_than_the_design_passes_with_an_inconclusive_cost(
    project: Path,
) -> None:
    (project / "long.py").write_text(TRAINING)
    result = check(project, *SMALL_DESIGN, "--", sys.executable, "long.py", "8")
    assert result.exit_code == 0, result.stdout + result.stderr
    cost = result.manifest["cost"]
    assert (cost["status"], cost["design"]["pairs"]) == ("inconclusive", 0)
    assert [run["name"] for run in result.manifest["runs"]] == ["A", "B"]  # none started
    assert cost["reason"].startswith("too short to time: 8 steps; 3 block pairs")
    assert cost["ci95_pct"] is None
    assert result.manifest["verdict"] == "pass"
