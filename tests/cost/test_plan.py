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
    STOP_MIN_PAIRS,
    max_steps,
    plan,
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


def test_a_plan_of_no_more_rounds_than_the_minimum_never_stops_early() -> None:
    # No rounds to spare: the run is never cut short.
    assert plan(CostConfig(blocks=STOP_MIN_PAIRS)).stop_pairs == 0
