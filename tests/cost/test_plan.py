"""The cost run's design: the arm of every step (warm-up, timed blocks reversed every other
round, census blocks), the cap the gate sets, the embedded reference's length and the plan as
the probe reads it."""

from __future__ import annotations

import json

from repro_gate.config import CostConfig
from repro_gate.cost.plan import (
    ARM_DEFAULT,
    ARM_DETERMINISTIC,
    ARM_NO_FILL,
    REFERENCE_STEP_FLOOR_SECONDS,
    STOP_MIN_PAIRS,
    max_steps,
    plan,
    reference_steps,
)


def test_the_plan_starts_in_the_default_arm_and_reverses_every_other_round() -> None:
    design = plan(CostConfig(warmup=3, block_steps=4, blocks=4))
    assert design.arms == (ARM_DETERMINISTIC, ARM_DEFAULT)
    assert design.warmup == (ARM_DEFAULT, ARM_DETERMINISTIC, ARM_DEFAULT)
    assert design.blocks == (ARM_DEFAULT, ARM_DETERMINISTIC, ARM_DETERMINISTIC, ARM_DEFAULT) * 2
    assert (design.census, design.timed_steps, design.steps) == ((), 35, 35)

    breakdown = plan(CostConfig(warmup=0, block_steps=2, blocks=2, breakdown=True))
    assert breakdown.arms == (ARM_DETERMINISTIC, ARM_NO_FILL, ARM_DEFAULT)
    assert breakdown.blocks == (ARM_DEFAULT, ARM_NO_FILL, ARM_DETERMINISTIC,
                                ARM_DETERMINISTIC, ARM_NO_FILL, ARM_DEFAULT)
    assert breakdown.census == (ARM_DETERMINISTIC, ARM_DEFAULT)
    assert breakdown.steps == 12 + 4


def test_the_gate_caps_the_cost_run_at_cost_steps_only() -> None:
    # The probe ends the run at the end of its plan, whose blocks it may lengthen.
    assert max_steps(CostConfig(warmup=3, block_steps=4, blocks=6)) == 0
    assert max_steps(CostConfig(warmup=3, block_steps=4, blocks=6, steps=20)) == 20
    assert json.loads(plan(CostConfig(block_seconds=0.5)).to_env())["block_seconds"] == 0.5


def test_the_reference_trains_long_enough_for_the_longest_blocks() -> None:
    # Blocks of 0.25 s at no less than 0.2 ms a step: 1250 steps; 2 arms of `blocks` blocks
    # after 5 warm-up steps.
    blocks = CostConfig().blocks
    assert reference_steps(CostConfig()) == 5 + blocks * 2 * 1250
    assert reference_steps(CostConfig(block_seconds=0, block_steps=4)) == 5 + blocks * 2 * 4
    assert reference_steps(CostConfig(breakdown=True)) == 5 + (blocks * 3 + 2) * 1250
    assert reference_steps(CostConfig(steps=300)) == 300


def test_the_warm_up_rotates_through_every_arm_default_first() -> None:
    design = plan(CostConfig(warmup=5, blocks=1, breakdown=True))
    assert design.warmup == (ARM_DEFAULT, ARM_NO_FILL, ARM_DETERMINISTIC, ARM_DEFAULT,
                             ARM_NO_FILL)
    assert plan(CostConfig(warmup=0)).warmup == ()
    # Each arm gets one block per round.
    design = plan(CostConfig(blocks=5))
    assert design.rounds == 5
    assert design.blocks.count(ARM_DEFAULT) == design.blocks.count(ARM_DETERMINISTIC) == 5


def test_the_plan_the_probe_reads_round_trips_through_json() -> None:
    design = plan(CostConfig(warmup=2, block_steps=3, blocks=2, block_seconds=0.1,
                             breakdown=True))
    assert json.loads(design.to_env()) == {
        "warmup": list(design.warmup), "blocks": list(design.blocks),
        "census": [ARM_DETERMINISTIC, ARM_DEFAULT], "block_steps": 3, "block_seconds": 0.1,
        "stop_pairs": 0, "stop_width_pct": 10.0}
    assert " " not in design.to_env()  # compact: one environment variable
    assert design.timed_steps == 2 + 6 * 3
    assert design.steps == design.timed_steps + 2 * 3


def test_the_probe_may_stop_early_only_with_rounds_to_spare_past_the_minimum() -> None:
    design = plan(CostConfig(blocks=16, max_width_pct=20))
    assert (design.stop_pairs, design.stop_width_pct) == (STOP_MIN_PAIRS, 10.0)
    # No rounds to spare: the run is never cut short.
    assert plan(CostConfig(blocks=STOP_MIN_PAIRS)).stop_pairs == 0


def test_the_reference_needs_blocks_as_long_as_its_quickest_steps_require() -> None:
    cost = CostConfig(warmup=1, blocks=1, block_steps=2, block_seconds=0.001)
    longest = round(0.001 / REFERENCE_STEP_FLOOR_SECONDS)  # 5 steps beat 2
    assert reference_steps(cost) == 1 + 2 * longest
    assert reference_steps(CostConfig(warmup=1, blocks=1, block_steps=9,
                                      block_seconds=0.001)) == 1 + 2 * 9
