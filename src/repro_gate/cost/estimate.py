"""The cost of determinism from the cost run's blocks: estimate, 95% interval, status, budget.

The units are the rounds of the design (cost/plan.py), one block per arm each: a unit is
the log of the ratio of the deterministic block's step time to the default block's in the same
round. Blocks of one round ran seconds apart in one process, so the drift of the machine from
process to process, and most of it within the process, affects both alike; what is left varies
from unit to unit and is what the interval measures. With a handful of units a bootstrap
underestimates the spread (it cannot resample what it has not seen), so the interval is
Student's t over the units: mean +- t(0.975, n - 1) x sd / sqrt(n), on the log scale.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict

from repro_gate.config import CostConfig
from repro_gate.cost.plan import ARM_DEFAULT, ARM_DETERMINISTIC, ARM_NO_FILL, CostPlan

MIN_PAIRS = 3  # fewer units than this: inconclusive, whatever the interval says
# How much slower than run A's steps the cost run's may be timed at (its warm-up's first uses):
# a cost run is skipped only when even blocks made for steps this slow leave no room.
SLOWER_STEPS = 2.0
TOP_OPS = 10
# t(0.975, df) for df = 1..30; beyond, the Cornish-Fisher expansion is within 1e-4 of it.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z_975 = 1.959964
NOTE = ("CUBLAS_WORKSPACE_CONFIG is set for the whole cost run (cuBLAS reads its workspace"
        " setting once, at start-up), so both arms pay for it and the figure leaves it out")
Status = Literal["measured", "inconclusive"]
BudgetStatus = Literal["over", "within", "inconclusive"]


class _DesignFields(TypedDict):
    arms: list[str]
    block_steps: int  # the length the probe used
    block_steps_planned: int  # cost.block_steps: the probe lengthens from it
    blocks: int
    pairs: int
    warmup_steps: int


class Design(_DesignFields, total=False):
    stopped_after_pairs: int  # the probe stopped the timed blocks early: the interval was narrow


class Budget(TypedDict):
    max_pct: float
    status: BudgetStatus


class Share(TypedDict):
    pct: float | None
    ci95_pct: list[float] | None
    pairs: int


class OpCost(TypedDict):
    name: str
    det_ms: float
    default_ms: float


class Cost(TypedDict, total=False):
    """The manifest's `cost` section (manifest.schema.json `$defs.cost`)."""

    status: Status
    reason: str
    pct: float | None
    ci95_pct: list[float] | None
    basis: str  # blocks | wall | runs (migrated from schema version 2)
    det_step_seconds: float | None
    default_step_seconds: float | None
    design: Design | None
    pair_pcts: list[float]
    max_width_pct: float | None
    note: str
    budget: Budget
    breakdown: dict[str, Any]
    ops: list[OpCost]


@dataclass(frozen=True)
class Estimate:
    """The mean of log ratios over units, as a percentage with its 95% interval."""

    pct: float | None
    ci95_pct: list[float] | None
    units: int

    @property
    def width(self) -> float | None:
        return None if self.ci95_pct is None else self.ci95_pct[1] - self.ci95_pct[0]


def t_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom."""
    if df <= len(T_975):
        return T_975[df - 1]
    z = Z_975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def estimate(log_ratios: Sequence[float]) -> Estimate:
    """Point estimate and t-interval of exp(mean log ratio) - 1, in percent. No interval from
    fewer than MIN_PAIRS units: from two, t(1) = 12.7 makes it meaningless (once -100% to
    +63123226%), and nothing should print it."""
    count = len(log_ratios)
    if count == 0:
        return Estimate(None, None, 0)
    mean = statistics.fmean(log_ratios)
    if count < MIN_PAIRS:
        return Estimate(_pct(mean), None, count)
    half = t_975(count - 1) * statistics.stdev(log_ratios) / math.sqrt(count)
    return Estimate(_pct(mean), [_pct(mean - half), _pct(mean + half)], count)


def narrow_enough(log_ratios: Sequence[float], min_pairs: int, width_pct: float) -> bool:
    """Whether the cost run may stop: at least `min_pairs` units (and MIN_PAIRS), and the 95%
    interval at most `width_pct` percentage points wide. The probe's copy
    (_repro_gate_cost_rule.narrow_enough) must agree: a contract test checks it."""
    if min_pairs <= 0 or len(log_ratios) < max(min_pairs, MIN_PAIRS):
        return False
    mean = statistics.fmean(log_ratios)
    half = t_975(len(log_ratios) - 1) * statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return (math.expm1(mean + half) - math.expm1(mean - half)) * 100.0 <= width_pct


def block_times(trajectory: list[dict[str, Any]], block_steps: int) -> dict[int, tuple[str, float]]:
    """(arm, step time) of each complete timed block, by block index.

    A block's step time is the median of its steps' times; where the probe drained an
    accelerator's queue at the block's end ("drain"), it is the block's total over its steps
    instead, since the queued work of every step was only waited for at the end.
    """
    steps: dict[int, list[dict[str, Any]]] = {}
    for entry in trajectory:
        block = entry.get("block")
        if isinstance(block, int) and not isinstance(block, bool) and entry.get("time") is not None:
            steps.setdefault(block, []).append(entry)
    times: dict[int, tuple[str, float]] = {}
    for block, entries in steps.items():
        if len(entries) != block_steps:
            continue  # cut short by the end of the training
        drains = [float(e["drain"]) for e in entries if e.get("drain") is not None]
        values = [float(e["time"]) for e in entries]
        value = (sum(values) + sum(drains)) / len(values) if drains else statistics.median(values)
        if value > 0:
            times[block] = (str(entries[0].get("arm")), value)
    return times


def rounds(times: dict[int, tuple[str, float]], plan: CostPlan) -> list[dict[str, float]]:
    """Each complete round's block step time by arm, in order."""
    size = len(plan.arms)
    complete = []
    for index in range(plan.rounds):
        arms = {times[b][0]: times[b][1] for b in range(index * size, (index + 1) * size)
                if b in times}
        if set(arms) == set(plan.arms):
            complete.append(arms)
    return complete


def log_ratios(units: list[dict[str, float]], slower: str, faster: str) -> list[float]:
    return [math.log(unit[slower] / unit[faster]) for unit in units]


def shortest_blocks(plan: CostPlan, step_seconds: float | None) -> CostPlan:
    """The plan with the shortest blocks the probe could choose for a training whose steps
    take `step_seconds` in run A (None: unknown, or the probe does not lengthen them): it
    lengthens them to last `block_seconds`, and the cost run's steps are taken to be up to
    SLOWER_STEPS times slower than run A's, so that a block is never predicted longer than
    the probe would make it. The probe times a step from the warm-up steps that repeat an arm:
    without one it lengthens nothing."""
    timed = any(arm in plan.warmup[:index] for index, arm in enumerate(plan.warmup))
    if not timed or not step_seconds or step_seconds <= 0 or plan.block_seconds <= 0:
        return plan
    steps = math.ceil(plan.block_seconds / (SLOWER_STEPS * step_seconds))
    return replace(plan, block_steps=max(plan.block_steps, steps))


def fewest_steps(plan: CostPlan) -> int:
    """The fewest optimizer steps in which the cost run can time MIN_PAIRS block pairs with
    blocks of `plan.block_steps`: a training with fewer gets no figure."""
    return _steps_for_pairs(plan, MIN_PAIRS)


def not_started(steps: int, plan: CostPlan, config: CostConfig) -> Cost:
    """The cost section of a training of `steps` steps, fewer than `fewest_steps(plan)`:
    inconclusive without a cost run, which could not have timed enough block pairs."""
    cost = cost_of_determinism([], plan, config)  # the section's shape; its reason is below
    cost["basis"] = "blocks"
    if cost["design"]:
        cost["design"]["block_steps_planned"] = config.block_steps
    why = (f" steps or more, to last {config.block_seconds:g} s at half run A's speed"
           if plan.block_steps > config.block_steps else "")
    cost["reason"] = (f"too short to time: {steps} steps; {MIN_PAIRS} block pairs, the fewest"
                      f" for a figure, need at least {fewest_steps(plan)} ({len(plan.warmup)}"
                      f" warm-up + {MIN_PAIRS} x {len(plan.arms)} blocks of"
                      f" {plan.block_steps}{why}), so the cost run was not started")
    return cost


def cost_of_determinism(
    trajectory: list[dict[str, Any]], plan: CostPlan, config: CostConfig,
    probe_report: dict[str, Any] | None = None,
) -> Cost:
    """The cost section from the cost run's rank 0 trajectory and the probe's COST_FILE."""
    report = probe_report or {}
    block_steps = used_block_steps(report, plan)
    times = block_times(trajectory, block_steps)
    units = rounds(times, plan)
    overall = estimate(log_ratios(units, ARM_DETERMINISTIC, ARM_DEFAULT))
    cost: Cost = {
        "pct": overall.pct,
        "ci95_pct": overall.ci95_pct,
        "basis": "blocks" if trajectory else "wall",
        "det_step_seconds": _arm_median(times, ARM_DETERMINISTIC),
        "default_step_seconds": _arm_median(times, ARM_DEFAULT),
        "design": {"arms": list(plan.arms), "block_steps": block_steps,
                   "block_steps_planned": plan.block_steps, "blocks": plan.rounds,
                   "pairs": len(units), "warmup_steps": len(plan.warmup)},
        "pair_pcts": [_pct(value) for value in log_ratios(units, ARM_DETERMINISTIC, ARM_DEFAULT)],
        "max_width_pct": float(config.max_width_pct),
        "note": NOTE,
    }
    reason = inconclusive_reason(overall, config, replace(plan, block_steps=block_steps),
                                 len(trajectory), report)
    stopped = report.get("stopped_after_pairs")
    if isinstance(stopped, int) and not isinstance(stopped, bool) and cost["design"]:
        cost["design"]["stopped_after_pairs"] = stopped
    cost["status"] = "inconclusive" if reason else "measured"
    if reason:
        cost["reason"] = reason
    if config.max_pct is not None:
        cost["budget"] = budget(cost["status"], overall.ci95_pct, config.max_pct)
    if config.breakdown:
        cost["breakdown"] = breakdown(units, report)
        cost["ops"] = top_ops(report.get("census"))
    return cost


def used_block_steps(report: dict[str, Any], plan: CostPlan) -> int:
    """The block length the probe used (COST_FILE), else the plan's: the probe lengthens the
    blocks of a quick training to last `cost.block_seconds`."""
    used = report.get("block_steps")
    if isinstance(used, int) and not isinstance(used, bool) and used >= plan.block_steps:
        return used
    return plan.block_steps


def inconclusive_reason(
    overall: Estimate, config: CostConfig, plan: CostPlan, steps: int, report: dict[str, Any]
) -> str | None:
    """Why the figure cannot be reported as measured; None when it can. `plan` has the
    block length the probe used."""
    if steps == 0:
        return "no optimizer step was seen, so no block could be timed"
    if overall.units < MIN_PAIRS:
        errors = [str(error) for error in report.get("errors") or []]
        if errors:
            return (f"too few block pairs were timed ({overall.units}, {MIN_PAIRS} needed): the"
                    f" probe could not switch the determinism knobs ({errors[0]})")
        return (f"too short to time: {steps} steps, the design needs {plan.timed_steps}"
                f" ({len(plan.warmup)} warm-up + {plan.rounds} x {len(plan.arms)} blocks of"
                f" {plan.block_steps}{_lengthened(plan, config)}); {MIN_PAIRS} block pairs,"
                f" the fewest for a figure, need {_steps_for_pairs(plan, MIN_PAIRS)}")
    width = overall.width
    if width is not None and width > config.max_width_pct:
        return (f"the 95% interval is {width:.1f} percentage points wide"
                f" (limit {config.max_width_pct:g}): the machine's speed varied too much")
    return None


def _steps_for_pairs(plan: CostPlan, pairs: int) -> int:
    """Steps up to the end of the first `pairs` rounds of the plan."""
    return len(plan.warmup) + pairs * len(plan.arms) * plan.block_steps


def budget(status: Status, interval: list[float] | None, max_pct: float) -> Budget:
    """over: the whole interval lies above the budget; within: below; else inconclusive."""
    verdict: BudgetStatus = "inconclusive"
    if status == "measured" and interval is not None:
        if interval[0] > max_pct:
            verdict = "over"
        elif interval[1] < max_pct:
            verdict = "within"
    return {"max_pct": float(max_pct), "status": verdict}


def breakdown(units: list[dict[str, float]], report: dict[str, Any]) -> dict[str, Any]:
    """The cost split by the deterministic_no_fill arm, each part over its own units."""
    if ARM_NO_FILL in (report.get("unavailable") or []):
        empty: Share = {"pct": None, "ci95_pct": None, "pairs": 0}
        return {"fill_uninitialized_memory": empty, "deterministic_kernels": dict(empty),
                "reason": "this torch has no torch.utils.deterministic.fill_uninitialized_memory"
                          " (torch >= 2.1 has it)"}
    return {
        "fill_uninitialized_memory": _share(log_ratios(units, ARM_DETERMINISTIC, ARM_NO_FILL)),
        "deterministic_kernels": _share(log_ratios(units, ARM_NO_FILL, ARM_DEFAULT)),
    }


def top_ops(census: Any) -> list[OpCost]:
    """The ops whose time per step grows most from the default to the deterministic arm; none
    unless both census blocks were profiled (the training may end before)."""
    if not isinstance(census, dict):
        return []
    det, default = census.get(ARM_DETERMINISTIC), census.get(ARM_DEFAULT)
    if not isinstance(det, dict) or not isinstance(default, dict):
        return []
    ops = [OpCost(name=str(name), det_ms=round(float(ms), 4),
                  default_ms=round(float(default.get(name, 0.0)), 4))
           for name, ms in det.items()]
    grown = [op for op in ops if op["det_ms"] > op["default_ms"]]
    grown.sort(key=lambda op: op["default_ms"] - op["det_ms"])
    return grown[:TOP_OPS]


def _lengthened(plan: CostPlan, config: CostConfig) -> str:
    """Why the blocks are longer than `cost.block_steps`, if they are."""
    if plan.block_steps <= config.block_steps:
        return ""
    return f", lengthened from {config.block_steps} to last {config.block_seconds:g} s"


def _share(values: list[float]) -> Share:
    part = estimate(values)
    return {"pct": part.pct, "ci95_pct": part.ci95_pct, "pairs": part.units}


def _arm_median(times: dict[int, tuple[str, float]], arm: str) -> float | None:
    values = [value for name, value in times.values() if name == arm]
    return round(statistics.median(values), 9) if values else None


def _pct(log_ratio: float) -> float:
    return round(math.expm1(log_ratio) * 100.0, 2)
