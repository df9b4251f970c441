"""The cost of determinism in words, never stating more than the data supports.

One reading of the manifest's `cost` section (`CostView`) and the phrases every report uses: the
console, the check run, the PR comment, the job summary, the failure reason and the step outputs.
A measured cost is shown with its 95% interval and the number of block pairs behind it; an
inconclusive one says why, and its point figure is never shown; its interval may follow, but never
one from fewer than MIN_PAIRS block pairs (the gate no longer records one; older manifests may).
The section is read tolerantly: a field of the wrong type reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from repro_gate.compare.structured import is_number

# The reason code of a gate that failed on its cost budget; `gate/verdict.py` names it among the
# reason codes (a test keeps the two equal). When it is the only failure it is the first reason.
OVER_BUDGET_CODE = "cost_over_budget"
# As cost/estimate.py's MIN_PAIRS (a test keeps the two equal): fewer pairs give no interval.
MIN_PAIRS = 3
UNIT = "block pair"  # the unit of the interval: one (deterministic, default) pair of blocks
BREAKDOWN_LABELS = {
    "fill_uninitialized_memory": "filling uninitialised memory",
    "deterministic_kernels": "deterministic kernels",
}


class CostStatus(str, Enum):
    MEASURED = "measured"
    INCONCLUSIVE = "inconclusive"


class BudgetStatus(str, Enum):
    OVER = "over"
    WITHIN = "within"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def text(self) -> str:
        return f"95% interval {self.low:+.1f}% to {self.high:+.1f}%"


@dataclass(frozen=True)
class Part:
    """One share of the cost from the breakdown arm: its estimate and interval."""

    label: str
    pct: float | None
    interval: Interval | None
    pairs: int | None


@dataclass(frozen=True)
class OpCost:
    """One op of the census: its time per step in each arm."""

    name: str
    det_ms: float
    default_ms: float


@dataclass(frozen=True)
class Budget:
    max_pct: float
    status: BudgetStatus


@dataclass(frozen=True)
class CostView:
    """What a report may say about the cost: `pct` only when the status is measured."""

    status: CostStatus
    reason: str
    pct: float | None
    interval: Interval | None
    pairs: int | None
    max_width_pct: float | None
    det_step_seconds: float | None
    default_step_seconds: float | None
    block_steps: int | None
    budget: Budget | None
    breakdown: tuple[Part, ...]
    breakdown_reason: str
    ops: tuple[OpCost, ...]
    note: str

    @property
    def measured(self) -> bool:
        return self.status is CostStatus.MEASURED and self.pct is not None


def read(cost: Any) -> CostView | None:
    """The view of a manifest's `cost` section; None when the cost was not measured at all.

    A section without a known status (an older shape) reads as inconclusive.
    """
    if not isinstance(cost, Mapping):
        return None
    status = _enum(CostStatus, cost.get("status")) or CostStatus.INCONCLUSIVE
    design = _mapping(cost.get("design"))
    return CostView(
        status=status,
        reason=_text(cost.get("reason")) or ("" if "status" in cost else "no status recorded"),
        pct=_number(cost.get("pct")),
        interval=_supported(_interval(cost.get("ci95_pct")), _count(design.get("pairs"))),
        pairs=_count(design.get("pairs")),
        max_width_pct=_number(cost.get("max_width_pct")),
        det_step_seconds=_number(cost.get("det_step_seconds")),
        default_step_seconds=_number(cost.get("default_step_seconds")),
        block_steps=_count(design.get("block_steps")),
        budget=_budget(cost.get("budget")),
        breakdown=_breakdown(cost.get("breakdown")),
        breakdown_reason=_text(_mapping(cost.get("breakdown")).get("reason")),
        ops=_ops(cost.get("ops")),
        note=_text(cost.get("note")),
    )


def figure(view: CostView) -> str:
    """`+3.1% (95% interval +1.2% to +5.0%, 6 block pairs)`, or `inconclusive (<reason>; …)`."""
    evidence = [view.interval.text()] if view.interval else []
    if view.pairs is not None:
        evidence.append(_plural(view.pairs, UNIT))
    if view.measured:
        return f"{view.pct:+.1f}% ({', '.join(evidence) or 'no interval'})"
    reason = view.reason or "the data cannot support a figure"
    return f"inconclusive ({'; '.join([reason, ', '.join(evidence)]) if evidence else reason})"


def short_figure(view: CostView) -> str:
    """`+3.1% (95% interval +1.2% to +5.0%)` for a title; `inconclusive` when not measured."""
    if not view.measured:
        return "inconclusive"
    return f"{view.pct:+.1f}%" + (f" ({view.interval.text()})" if view.interval else "")


def budget_text(view: CostView) -> str:
    """`within the 10% budget`, `over the 10% budget: …`, `budget inconclusive: …`; or empty."""
    budget = view.budget
    if budget is None:
        return ""
    limit = f"{budget.max_pct:g}% budget"
    if budget.status is BudgetStatus.OVER:
        return f"over the {limit}: the whole interval lies above it"
    if budget.status is BudgetStatus.WITHIN:
        return f"within the {limit}"
    if not view.measured:
        return f"budget inconclusive: the cost is inconclusive, so the {limit} cannot be judged"
    return f"budget inconclusive: the interval straddles the {limit}"


def sentence(view: CostView) -> str:
    """The figure and the budget's verdict on it, e.g. for the console line."""
    budget = budget_text(view)
    return figure(view) + (f"; {budget}" if budget else "")


def over_budget(view: CostView) -> bool:
    """Whether a budget is set and the whole interval lies above it."""
    return view.budget is not None and view.budget.status is BudgetStatus.OVER


def over_budget_reason(view: CostView) -> str:
    """The message of the `cost_over_budget` reason."""
    return f"the cost of determinism, {figure(view)}, is {budget_text(view)}"


def breakdown_text(view: CostView) -> str:
    """`filling uninitialised memory +1.0% (95% interval …), deterministic kernels …`, then the
    reason a share could not be had, if one was given."""
    text = ", ".join(f"{part.label} {part_figure(view, part)}" for part in view.breakdown)
    return "; ".join(p for p in (text, view.breakdown_reason) if p)


def part_figure(view: CostView, part: Part) -> str:
    """One share with its interval, held to the cost's own rule: inconclusive without an
    interval or when the interval is wider than the limit (an interval from enough pairs may
    follow)."""
    too_wide = (
        part.interval is not None
        and view.max_width_pct is not None
        and part.interval.width > view.max_width_pct
    )
    evidence = [part.interval.text()] if part.interval else []
    if part.pairs is not None:
        evidence.append(_plural(part.pairs, UNIT))
    shown = f" ({', '.join(evidence)})" if evidence else ""
    if part.pct is None or part.interval is None or too_wide:
        return f"inconclusive{shown}"
    return f"{part.pct:+.1f}%{shown}"


def top_ops(view: CostView, limit: int) -> list[OpCost]:
    """The ops whose deterministic time exceeds their default time most, largest first."""
    return sorted(view.ops, key=lambda op: op.det_ms - op.default_ms, reverse=True)[:limit]


def op_text(op: OpCost) -> str:
    return f"{op.name} {op.det_ms:.3g} ms deterministic vs {op.default_ms:.3g} ms default"


def steps_text(view: CostView) -> str:
    """`step 2.9 ms deterministic vs 2.8 ms default (medians over blocks of 4 steps)`."""
    if view.det_step_seconds is None or view.default_step_seconds is None:
        return ""
    blocks = f" (medians over blocks of {view.block_steps} steps)" if view.block_steps else ""
    return (f"step {_ms(view.det_step_seconds)} deterministic vs"
            f" {_ms(view.default_step_seconds)} default{blocks}")


def output_pct(view: CostView | None) -> str:
    """The `cost-pct` step output: the figure when measured, else empty."""
    return f"{view.pct:.2f}" if view is not None and view.measured else ""


def output_status(view: CostView | None) -> str:
    """The `cost-status` step output: `measured`, `inconclusive`, or empty when not measured."""
    return "" if view is None else view.status.value


def over_budget_only(manifest: Mapping[str, Any]) -> bool:
    """A fail whose only failure is the cost budget: reproducible, but over budget."""
    reasons = manifest.get("reasons")
    first = reasons[0] if isinstance(reasons, list) and reasons else None
    return (manifest.get("verdict") == "fail" and isinstance(first, Mapping)
            and first.get("code") == OVER_BUDGET_CODE)


def _budget(value: Any) -> Budget | None:
    budget = _mapping(value)
    limit, status = _number(budget.get("max_pct")), _enum(BudgetStatus, budget.get("status"))
    return Budget(limit, status) if limit is not None and status is not None else None


def _breakdown(value: Any) -> tuple[Part, ...]:
    parts = _mapping(value)
    return tuple(
        Part(label, _number(share.get("pct")),
             _supported(_interval(share.get("ci95_pct")), _count(share.get("pairs"))),
             _count(share.get("pairs")))
        for key, label in BREAKDOWN_LABELS.items()
        if key in parts and (share := _mapping(parts[key]))
    )


def _ops(value: Any) -> tuple[OpCost, ...]:
    found = []
    for item in value if isinstance(value, list) else []:
        op = _mapping(item)
        det, default = _number(op.get("det_ms")), _number(op.get("default_ms"))
        if isinstance(op.get("name"), str) and det is not None and default is not None:
            found.append(OpCost(op["name"], det, default))
    return tuple(found)


def _interval(value: Any) -> Interval | None:
    if isinstance(value, list) and len(value) == 2 and all(map(is_number, value)):
        return Interval(float(value[0]), float(value[1]))
    return None


def _supported(interval: Interval | None, pairs: int | None) -> Interval | None:
    """The interval, unless it comes from fewer than MIN_PAIRS pairs: then none at all."""
    return None if pairs is not None and pairs < MIN_PAIRS else interval


def _enum(kind: Any, value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ms(seconds: float) -> str:
    milliseconds = seconds * 1000
    return f"{milliseconds:.1f} ms" if milliseconds >= 1 else f"{milliseconds:.3f} ms"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
