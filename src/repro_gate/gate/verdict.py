"""Turn comparisons and run outcomes into the verdict (pass / fail / error) and its reasons."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, TypedDict

from repro_gate.compare import status
from repro_gate.compare.document import Comparison
from repro_gate.compare.fields import parse_path
from repro_gate.compare.resume import headline
from repro_gate.render import cost_text
from repro_gate.render.diagnosis import explain

PASS, FAIL, ERROR = "pass", "fail", "error"

# Codes of the `reasons` of a pass or a fail; an error's code is its `errors.ErrorKind`.
TRAJECTORY_DIVERGED = "trajectory_diverged"
ARTIFACT_DIFFERENT = "artifact_different"
ARTIFACT_MISSING = "artifact_missing"
NONDETERMINISTIC_OP_STRICT = "nondeterministic_op_strict"
BITWISE_EQUAL = "bitwise_equal"
WITHIN_TOLERANCE = status.WITHIN_TOLERANCE.value  # every artifact equal or within it
COST_OVER_BUDGET = "cost_over_budget"  # `cost.max_pct` set and the whole interval lies above it
RESUME_CHANGED = "resume_changed"  # run R, stopped and resumed, did not continue as run A did
NUMERICS_CHANGED = "numerics_changed"  # run A differs from its golden trajectory (on_change: fail)
NOT_PORTABLE = "not_portable"  # a run that varied one factor differs from A (vary.on_change: fail)
REASON_CODES = frozenset({
    TRAJECTORY_DIVERGED,
    ARTIFACT_DIFFERENT,
    ARTIFACT_MISSING,
    NONDETERMINISTIC_OP_STRICT,
    BITWISE_EQUAL,
    WITHIN_TOLERANCE,
    COST_OVER_BUDGET,
    RESUME_CHANGED,
    NUMERICS_CHANGED,
    NOT_PORTABLE,
})


# Key names of values that change from run to run without being results: a failure on these
# alone suggests `compare.ignore`.
VOLATILE_NAMES = ("*_at", "*time*", "*timestamp*", "host*", "*run_id*", "date")
UNFAILING_KEY_STATUSES = status.UNFAILING
MAX_HINTED = 5


class Reason(TypedDict):
    code: str
    message: str


def reason(code: str, message: str) -> Reason:
    """One entry of the manifest's `reasons`."""
    return {"code": code, "message": message}


def failures(comparison: Comparison, strict_ops: list[dict[str, Any]]) -> list[Reason]:
    """Why the runs are not reproducible; empty when they are.

    Under a numeric tolerance the bitwise trajectory is evidence, not a verdict: the artifacts
    decide.
    """
    found: list[Reason] = []
    divergence = comparison.get("first_divergence")
    if divergence and comparison["basis"] == "bitwise":
        multi_rank = comparison["trajectory"].get("ranks", 1) > 1
        found.append(reason(TRAJECTORY_DIVERGED, explain(divergence, multi_rank)))
    for item in comparison["artifacts"]:
        runs = item.get("runs", ["A", "B"])
        if item["status"] == status.DIFFERENT:
            found.append(reason(
                ARTIFACT_DIFFERENT,
                f"{item['path']} differs between runs {runs[0]} and {runs[1]}"
                + _tensor_count(item) + _volatile_hint(item),
            ))
        elif item["status"] in (status.MISSING_IN_A, status.MISSING_IN_B):
            present = runs[1] if item["status"] == status.MISSING_IN_A else runs[0]
            found.append(reason(
                ARTIFACT_MISSING, f"{item['path']} is present in run {present} only"
            ))
    resume = comparison.get("resume")
    if resume and resume["status"] == status.Resume.CHANGED:
        found.append(reason(RESUME_CHANGED, f"the resume check: {headline(resume)}"))
    for op in strict_ops:
        where = f" at {op['file']}:{op['line']}" if op.get("file") else ""
        found.append(reason(
            NONDETERMINISTIC_OP_STRICT,
            f"{op['op']}{where} has no deterministic implementation and determinism is strict",
        ))
    return found


def successes(
    comparison: Comparison, compared_runs: int, deterministic: bool = True
) -> list[Reason]:
    """What was shown equal, saying whether bitwise or within tolerance (and `deterministic`
    runs only when the probe applied determinism)."""
    runs = f"{compared_runs} deterministic runs" if deterministic else f"{compared_runs} runs"
    steps = comparison["trajectory"]["steps_compared"]
    items = comparison["artifacts"]
    what = f"{steps} steps and {len(items)} artifacts" if steps else f"{len(items)} artifacts"
    within = [a for a in items if a["status"] == status.WITHIN_TOLERANCE]
    divergence = comparison.get("first_divergence")
    if not within and not divergence:
        return [reason(BITWISE_EQUAL,
                       f"{runs} are bitwise equal: {what}")]
    parts = [f"{runs} agree within tolerance on {what}"]
    if within:
        bounds = ", ".join(f"{k}={v:g}" for k, v in within[0].get("tolerance", {}).items())
        parts.append(f"not bitwise: {', '.join(a['path'] for a in within)} ({bounds})")
    if divergence:
        parts.append(f"steps differ bitwise from step {divergence['step']}")
    return [reason(WITHIN_TOLERANCE, "; ".join(parts))]


def with_budget(
    outcome: str, reasons: list[Reason], cost: Mapping[str, Any] | None
) -> tuple[str, list[Reason]]:
    """The verdict once the cost budget is applied: over it, the gate fails; otherwise (within,
    inconclusive, no budget) nothing changes.

    The reproducibility result stays beside the budget's reason. When the budget is the only
    failure its reason comes first (it is what failed the gate; the report's headline reads it
    there), followed by what was shown equal; otherwise it comes after the other failures.
    """
    view = cost_text.read(cost)
    if outcome == ERROR or view is None or not cost_text.over_budget(view):
        return outcome, reasons
    over = reason(COST_OVER_BUDGET, cost_text.over_budget_reason(view))
    if outcome == PASS:
        return FAIL, [over, *reasons]
    return outcome, [*reasons, over]


def _volatile_hint(item: Mapping[str, Any]) -> str:
    """`; only `finished_at` differs in …` when every differing key of a JSON/YAML artifact
    looks like a timestamp, host name or run id rather than a result."""
    keys = [k["key"] for k in item.get("keys", []) if k["status"] not in UNFAILING_KEY_STATUSES]
    if item["kind"] not in ("json", "yaml") or not keys or not all(map(_looks_volatile, keys)):
        return ""
    shown = ", ".join(f"`{key}`" for key in keys[:MAX_HINTED])
    shown += f" and {len(keys) - MAX_HINTED} more" if len(keys) > MAX_HINTED else ""
    if len(keys) == 1:
        return (f"; only {shown} differs in {item['path']}:"
                " add it to `compare.ignore` if it is not a result")
    return (f"; only {shown} differ in {item['path']}:"
            " add them to `compare.ignore` if they are not results")


def _looks_volatile(key: str) -> bool:
    names = [segment for segment in parse_path(key) if isinstance(segment, str)]
    return bool(names) and any(
        fnmatch.fnmatchcase(names[-1].lower(), pattern) for pattern in VOLATILE_NAMES
    )


def _tensor_count(item: Mapping[str, Any]) -> str:
    tensors = [t for t in item.get("tensors", []) if t["status"] != status.EQUAL]
    if not tensors:
        return ""
    worst = max((t.get("max_abs_diff") or 0.0 for t in tensors), default=0.0)
    return f" ({len(tensors)} tensors, max abs diff {worst:.3g})"
