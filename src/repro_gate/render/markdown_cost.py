"""The cost of determinism in Markdown: where it comes from (summary and comment) and the figures
behind it (check-run text). The sentences themselves are in `cost_text`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.render import cost_text
from repro_gate.render.markdown_text import TABLE_ROWS, cell, one_line, seconds

MAX_OPS = 10  # rows of the op census in the summary and the comment


def cost_sentence(manifest: Mapping[str, Any]) -> str:
    """The figure or why it is inconclusive, then the budget; empty when no cost was measured."""
    view = cost_text.read(manifest.get("cost"))
    return cost_text.sentence(view) if view else ""


def cost_title(manifest: Mapping[str, Any]) -> str:
    """The figure for a one-line title: `+3.1% (95% interval …)` or `inconclusive`."""
    view = cost_text.read(manifest.get("cost"))
    return cost_text.short_figure(view) if view else ""


def budget_limit(manifest: Mapping[str, Any]) -> str:
    """`10% ` for a title naming the budget; empty without one."""
    view = cost_text.read(manifest.get("cost"))
    return f"{view.budget.max_pct:g}% " if view and view.budget else ""


def cost_section(manifest: Mapping[str, Any]) -> str:
    """Where the cost comes from: the breakdown and the ops costing most, when measured."""
    view = cost_text.read(manifest.get("cost"))
    if view is None or not (view.breakdown or view.breakdown_reason or view.ops):
        return ""
    parts = ["**Where the cost of determinism comes from**"]
    shares = [f"- {part.label}: {cost_text.part_figure(view, part)}" for part in view.breakdown]
    if view.breakdown_reason:
        shares.append(f"- {one_line(view.breakdown_reason)}")
    if shares:
        parts.append("\n".join(shares))
    ops = cost_text.top_ops(view, MAX_OPS)
    if ops:
        rows = [f"| `{cell(op.name)}` | {op.det_ms:.3g} | {op.default_ms:.3g} |" for op in ops]
        parts.append("| Op | Deterministic (ms) | Default (ms) |\n|---|---|---|\n"
                     + "\n".join(rows))
    return "\n\n".join(parts)


def cost_details(manifest: Mapping[str, Any]) -> str:
    """The figures behind the cost, for the check-run text."""
    view = cost_text.read(manifest.get("cost"))
    if view is None:
        return ""
    cost = manifest["cost"]
    design = cost.get("design") if isinstance(cost.get("design"), Mapping) else {}
    pairs: list[tuple[str, Any]] = [
        ("status", view.status.value),
        ("reason", view.reason),
        ("cost", cost_text.figure(view)),
        ("budget", cost_text.budget_text(view)),
        ("deterministic step (median)", seconds(view.det_step_seconds)),
        ("default step (median)", seconds(view.default_step_seconds)),
        ("arms", ", ".join(map(str, design.get("arms") or []))),
        *((f"{key.replace('_', ' ')}", design.get(key))
          for key in ("block_steps", "blocks", "pairs", "stopped_after_pairs",
                      "warmup_steps")),
        ("widest interval reported as measured", _points(view.max_width_pct)),
    ]
    lines = [f"- {k}: {one_line(str(v))}" for k, v in pairs if v not in (None, "")]
    lines += [f"- op: {one_line(cost_text.op_text(op))}" for op in view.ops[:TABLE_ROWS]]
    if view.note:
        lines.append(f"- note: {one_line(view.note)}")
    return "**Determinism cost**\n\n" + "\n".join(lines)


def _points(value: float | None) -> str:
    return "" if value is None else f"{value:g} percentage points"
