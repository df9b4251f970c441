"""The cost run's early stop, as the probe decides it at the end of each round of timed blocks:
its rule agrees with the gate's (cost/estimate.py), and it stops only past the minimum of rounds.

The probe's module runs in this process with the real torch; the step records are what the
probe's timing hands it (a step number and its time), built here with chosen times.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from repro_gate.cost import estimate

torch = pytest.importorskip("torch")

ROUNDS = 12
# Two arms, the order reversed every other round, blocks of two steps, no warm-up.
PLAN = {"warmup": [], "census": [], "block_steps": 2, "block_seconds": 0.0,
        "blocks": [arm for index in range(ROUNDS)
                   for arm in (("default", "deterministic") if index % 2 == 0
                               else ("deterministic", "default"))],
        "stop_pairs": 8, "stop_width_pct": 10.0}


def run(probe_module: Callable[[str], ModuleType], noise: float,
        **plan: Any) -> tuple[list[int], dict[str, Any]]:
    """Feed every planned step (deterministic steps 10% slower, times varying by `noise`): the
    end step returned after each, up to the end, and COST_FILE."""
    arms = probe_module("_repro_gate_cost_arms")
    design = arms.Plan.from_json(json.dumps({**PLAN, **plan}))
    written: dict[str, Any] = {}
    errors: list[str] = []
    cost = arms.CostArms(torch, design, errors.append)
    rng = random.Random(7)
    ends: list[int] = []
    step = 0
    while not ends or step < ends[-1]:
        step += 1
        slot = design.slot(step)
        base = 0.011 if slot is not None and slot.arm == "deterministic" else 0.010
        ends.append(cost.on_step({"step": step, "time": base * rng.lognormvariate(0, noise)},
                                 written.__setitem__))
    assert errors == []
    return ends, written.get(arms.COST_FILE, {})


def test_the_probes_rule_is_the_gates(probe_module: Callable[[str], ModuleType]) -> None:
    arms = probe_module("_repro_gate_cost_rule")
    assert arms.T_975 == estimate.T_975 and arms.MIN_PAIRS == estimate.MIN_PAIRS
    assert all(arms.t_975(df) == estimate.t_975(df) for df in range(1, 200))
    rng = random.Random(1)
    agreed = set()
    for _ in range(5000):
        ratios = [rng.gauss(0.05, rng.choice((0.001, 0.02, 0.05, 0.2)))
                  for _ in range(rng.randrange(0, 40))]
        rule = (ratios, rng.randrange(0, 12), rng.choice((2.0, 5.0, 10.0, 20.0)))
        verdict = arms.narrow_enough(*rule)
        assert verdict == estimate.narrow_enough(*rule), rule
        agreed.add(verdict)
    assert agreed == {True, False}  # the inputs reach both answers


def test_a_steady_training_stops_after_the_minimum_of_rounds(
    probe_module: Callable[[str], ModuleType],
) -> None:
    ends, report = run(probe_module, noise=0.01)
    assert ends[-1] == len(ends) == 8 * 2 * 2  # 8 rounds of two blocks of two steps
    assert report["stopped_after_pairs"] == 8


def test_a_noisy_training_runs_the_whole_plan(
    probe_module: Callable[[str], ModuleType],
) -> None:
    ends, report = run(probe_module, noise=0.5)
    assert ends[-1] == len(ends) == ROUNDS * 2 * 2
    assert report.get("stopped_after_pairs") is None


def test_without_a_minimum_the_run_never_stops_early(
    probe_module: Callable[[str], ModuleType],
) -> None:
    ends, _ = run(probe_module, noise=0.01, stop_pairs=0)
    assert ends[-1] == ROUNDS * 2 * 2


def test_the_census_follows_an_early_stop(
    probe_module: Callable[[str], ModuleType],
) -> None:
    arms = probe_module("_repro_gate_cost_arms")
    design = arms.Plan.from_json(json.dumps({**PLAN, "census": ["deterministic", "default"]}))
    cut = design.stopped_after(8)
    assert len(cut.blocks) == 16 and cut.end == 16 * 2 + 2 * 2
    slot = cut.slot(16 * 2 + 1)
    assert slot is not None and slot.census and slot.arm == "deterministic"
