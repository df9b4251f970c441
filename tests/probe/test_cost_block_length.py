"""The cost run's block length, as the probe sets it at the end of the warm-up: the steps it
times a step by, the lengthening to `block_seconds`, the cap, and where the run ends.

The probe's module runs in this process with the real torch; the step records are what the
probe's timing hands it (a step number and its time), built here with chosen times.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

PLAN = {"warmup": ["default", "deterministic", "default", "deterministic", "default"],
        "blocks": ["default", "deterministic", "deterministic", "default",
                   "default", "deterministic"],
        "census": [], "block_steps": 2, "block_seconds": 0.25}


def run_warmup(probe_module: Callable[[str], ModuleType], times: list[float],
               cap: int | None = None, **plan: Any) -> tuple[list[int], dict[str, Any]]:
    """Feed the warm-up steps with `times`; the end step returned after each, and COST_FILE."""
    arms = probe_module("_repro_gate_cost_arms")
    written: dict[str, Any] = {}
    errors: list[str] = []
    cost = arms.CostArms(torch, arms.Plan.from_json(json.dumps({**PLAN, **plan})),
                         errors.append, cap)
    ends = [cost.on_step({"step": step, "time": time}, written.__setitem__)
            for step, time in enumerate(times, start=1)]
    assert errors == []
    return ends, written[arms.COST_FILE]


def test_a_quick_training_gets_blocks_that_last_block_seconds(
    probe_module: Callable[[str], ModuleType],
) -> None:
    # Step 1 (start-up) and each arm's first step (2: the first deterministic one) do not count:
    # the median of steps 3, 4, 5 is 10 ms, so blocks of 0.25 s are 25 steps long.
    ends, report = run_warmup(probe_module, [2.0, 0.5, 0.010, 0.011, 0.009])
    assert ends == [5 + 6 * 2] * 4 + [5 + 6 * 25]  # the run ends with the lengthened plan
    assert (report["block_steps"], report["block_steps_planned"]) == (25, 2)
    assert report["step_seconds"] == 0.010


def test_a_slow_training_keeps_the_planned_blocks(
    probe_module: Callable[[str], ModuleType],
) -> None:
    ends, report = run_warmup(probe_module, [2.0, 0.5, 0.2, 0.2, 0.2])
    assert ends[-1] == 5 + 6 * 2
    assert (report["block_steps"], report["step_seconds"]) == (2, 0.2)


def test_the_cap_shortens_the_lengthened_blocks_but_never_below_the_plan(
    probe_module: Callable[[str], ModuleType],
) -> None:
    # Blocks of 25 steps would need 155 steps: within a cap of 65, blocks of 10 fit.
    ends, report = run_warmup(probe_module, [2.0, 0.5, 0.01, 0.01, 0.01], cap=65)
    assert (ends[-1], report["block_steps"]) == (65, 10)
    ends, report = run_warmup(probe_module, [2.0, 0.5, 0.01, 0.01, 0.01], cap=9)
    assert (ends[-1], report["block_steps"]) == (9, 2)  # the cap ends the run, as before


def test_no_lengthening_without_block_seconds_or_a_step_to_time(
    probe_module: Callable[[str], ModuleType],
) -> None:
    assert run_warmup(probe_module, [2.0, 0.5, 0.01, 0.01, 0.01],
                      block_seconds=0)[1]["block_steps"] == 2
    # One warm-up step per arm: each is a first step, none times a step.
    _, report = run_warmup(probe_module, [2.0, 0.01], warmup=["default", "deterministic"])
    assert (report["block_steps"], report["step_seconds"]) == (2, None)


def test_on_an_accelerator_the_drain_counts_in_the_step_time(
    probe_module: Callable[[str], ModuleType],
) -> None:
    # The host queued steps 3 to 5 in 1 ms each; the drain waited 297 ms for their work.
    arms = probe_module("_repro_gate_cost_arms")
    assert arms.step_seconds([0.001, 0.001, 0.001], 0.297) == pytest.approx(0.1)
    assert arms.step_seconds([0.001, 0.003, 0.002], None) == 0.002
    assert arms.step_seconds([], None) is None
