"""The console report: what a person reads in ten seconds after `repro-gate check`.

Names and paths come from the training (artifact files, tensors, ops, the run's log): each line
is shown with its control characters escaped, so a name cannot start a line of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.status import Status
from repro_gate.errors import printable
from repro_gate.fingerprint import diff_lines
from repro_gate.render import cost_text, observed, resume_text, seeding_text, vary_text
from repro_gate.render.diagnosis import facts
from repro_gate.render.golden_line import golden_line, golden_of, numerics_changed_only

HEADLINES = {
    "pass": "PASS: reproducible",
    "fail": "FAIL: not reproducible",
    "error": "ERROR: the gate could not decide",
}
MAX_LISTED = 8
MAX_IGNORED = 4  # field names on an artifact's `ignored` line
MAX_COST_OPS = 3  # ops of the cost census on the console line
OVER_BUDGET_HEADLINE = "FAIL: reproducible, but over the cost budget"
NUMERICS_HEADLINE = "FAIL: reproducible, but the numerics changed"
RUNS_HEADING = "runs A and B"
GOLDEN_HEADING = "against the golden file"
RESUME_HEADING = "resume (run R against run A)"
NOT_PORTABLE_HEADLINE = "FAIL: reproducible here, but not portable"


def render(manifest: dict[str, Any], manifest_path: str | None, error_detail: str = "") -> str:
    """Verdict, what was compared, first divergence, nondeterministic ops, cost, manifest path."""
    headline = HEADLINES[manifest["verdict"]]
    if cost_text.over_budget_only(manifest):
        headline = OVER_BUDGET_HEADLINE
    if numerics_changed_only(manifest):
        headline = NUMERICS_HEADLINE
    if vary_text.not_portable_only(manifest):
        headline = NOT_PORTABLE_HEADLINE
    only_from = observed.of_manifest(manifest)
    if only_from:
        headline += f", {only_from}"
    lines = [f"repro-gate: {headline}"]
    lines += [f"  {r['message']}" for r in manifest["reasons"]]
    seed_note = seeding_text.gate_seed_note(manifest)
    if seed_note:
        lines.append(f"  {seed_note}")
    if error_detail:
        lines.append("  last lines of the run's log:")
        lines += [f"    | {line}" for line in error_detail.splitlines()]
    # Each comparison under its own heading: an artifact line after a golden reason is runs
    # A and B's, not the golden file's.
    lines += _group(RUNS_HEADING, comparison_lines(manifest["comparison"]))
    lines += _group(GOLDEN_HEADING, _golden(manifest))
    lines += _group(RESUME_HEADING, _resume(manifest["comparison"]))
    lines += _vary(manifest["comparison"])
    lines += _ops(manifest)
    lines += _cost(manifest)
    lines += _noise_floor(manifest)
    lines += _environment_diff(manifest)
    lines += _checklist(manifest)
    if manifest_path:
        lines.append(f"  manifest: {manifest_path}")
    lines += _reproduce(manifest)
    return "\n".join(printable(line) for line in lines)


def _group(heading: str, lines: list[str]) -> list[str]:
    """`lines` (each indented by two) under `heading`, one level deeper; nothing if empty."""
    return [f"  {heading}:", *(f"  {line}" for line in lines)] if lines else []


def _golden(manifest: dict[str, Any]) -> list[str]:
    """The golden comparison's line (unless a reason already says it) and the candidate file."""
    golden = golden_line(golden_of(manifest))
    lines = []
    if golden and all(r["message"] != golden for r in manifest["reasons"]):
        lines.append(f"  {golden}")
    candidate = (golden_of(manifest) or {}).get("candidate")
    if candidate:
        lines.append(f"  this run's golden file: {candidate}")
    return lines


def comparison_lines(comparison: Mapping[str, Any]) -> list[str]:
    """What was compared, per artifact, and the first divergent step."""
    return _compared(comparison) + _divergence(comparison)


def _compared(comparison: Mapping[str, Any]) -> list[str]:
    items = comparison["artifacts"]
    if not items and not comparison["trajectory"]["steps_compared"]:
        return []
    ranks = comparison["trajectory"].get("ranks", 1)
    per_rank = f" on each of {ranks} ranks" if ranks > 1 else ""
    out = [f"  compared: {comparison['trajectory']['steps_compared']} steps{per_rank}, "
           f"{len(items)} artifact comparisons ({comparison['basis']})"]
    for item in items[:MAX_LISTED]:
        out.append(f"    {item['path']}: {_artifact_summary(item)}")
        out += _ignored(item)
    if len(items) > MAX_LISTED:
        out.append(f"    … and {len(items) - MAX_LISTED} more (see the manifest)")
    return out


def _artifact_summary(item: dict[str, Any]) -> str:
    status = str(item["status"]).replace("_", " ")
    tensors = [t for t in item.get("tensors", []) if t["status"] != Status.EQUAL]
    if tensors:
        worst = tensors[0]
        status += (
            f": {len(tensors)} tensors differ, first {worst['name']}"
            f" ({worst.get('differing_elements', '?')} elements, max abs diff"
            f" {_number(worst.get('max_abs_diff'))}, max ULP {worst.get('max_ulp')})"
        )
    keys = [k for k in item.get("keys", []) if k["status"] != Status.EQUAL]
    if keys:
        status += f": {len(keys)} keys differ, first {keys[0]['key']}"
    if item.get("note"):
        status += f" [{item['note']}]"
    return status


def _ignored(item: dict[str, Any]) -> list[str]:
    """One line naming the fields `compare.ignore` left out of this artifact, if any."""
    ignored = item.get("ignored", [])
    if not ignored:
        return []
    names = [f"{i['key']} (differs)" if i["differs"] else i["key"] for i in ignored[:MAX_IGNORED]]
    more = f" and {len(ignored) - MAX_IGNORED} more" if len(ignored) > MAX_IGNORED else ""
    return [f"      ignored (compare.ignore): {', '.join(names)}{more}"]


def _divergence(comparison: Mapping[str, Any]) -> list[str]:
    divergence = comparison.get("first_divergence")
    if not divergence:
        return []
    params = divergence["parameters"]
    shown = ", ".join(params[:MAX_LISTED]) + (" …" if len(params) > MAX_LISTED else "")
    loss = " (loss differs too)" if divergence.get("loss_differs") else ""
    runs = " vs ".join(divergence["runs"])
    where = f"step {divergence['step']}"
    if comparison["trajectory"].get("ranks", 1) > 1:
        where = f"rank {divergence.get('rank', 0)}, {where}"
    # The sentence itself is among the reasons above; here, the evidence it rests on.
    evidence = [f"    {label}: {text}" for label, text in facts(divergence)]
    return [f"  first divergence: {where} ({runs}): {shown or 'loss only'}{loss}", *evidence]


def _resume(comparison: Mapping[str, Any]) -> list[str]:
    found = resume_text.lines(comparison)
    return [f"  {line}" for line in found[:1]] + [f"    {line}" for line in found[1:]]


def _vary(comparison: Mapping[str, Any]) -> list[str]:
    found = vary_text.lines(comparison)
    return [f"  {line}" for line in found[:1]] + [f"    {line}" for line in found[1:]]


def _ops(manifest: dict[str, Any]) -> list[str]:
    ops = manifest["nondeterministic_ops"]
    if not ops:
        return ["  nondeterministic ops: none seen"]
    out = ["  nondeterministic ops:"]
    for op in ops[:MAX_LISTED]:
        where = f"{op['file']}:{op['line']}" if op.get("file") else "(location unknown)"
        out.append(f"    {op['op']} at {where} ({op['count']}x, {op.get('kind', '')})")
    return out


def _cost(manifest: dict[str, Any]) -> list[str]:
    """The figure with its interval (or why it is inconclusive), the budget, where it comes from."""
    view = cost_text.read(manifest.get("cost"))
    if view is None:
        return ["  cost of determinism: not measured"]
    lines = [f"  cost of determinism: {cost_text.sentence(view)}"]
    steps = cost_text.steps_text(view)
    if steps and view.measured:
        lines.append(f"    {steps}")
    if view.breakdown or view.breakdown_reason:
        lines.append(f"    where it comes from: {cost_text.breakdown_text(view)}")
    ops = cost_text.top_ops(view, MAX_COST_OPS)
    if ops:
        lines.append(f"    ops costing most: {'; '.join(map(cost_text.op_text, ops))}")
    return lines


def _noise_floor(manifest: dict[str, Any]) -> list[str]:
    floor = manifest.get("noise_floor")
    if not floor:
        return []
    if floor["first_divergent_step"] is None:
        return [f"  noise floor: the {floor['steps_compared']} steps of two default-mode runs"
                " were identical"]
    return [f"  noise floor: default-mode runs diverge at step {floor['first_divergent_step']}"
            " (the nondeterminism that determinism removes)"]


def _environment_diff(manifest: dict[str, Any]) -> list[str]:
    changes = manifest.get("environment_diff")
    if changes is None:
        return []
    lines = diff_lines(changes)
    if not lines:
        return ["  environment vs baseline: no change"]
    return ["  environment vs baseline:"] + [f"    {line}" for line in lines[:MAX_LISTED]]


def _checklist(manifest: dict[str, Any]) -> list[str]:
    items = (manifest.get("checklist") or {}).get("items", [])
    shown = ("fail", "warn", "risk")  # in this order
    failing = [i for i in items if i["status"] in shown]
    if not items:
        return []
    if not failing:
        return [f"  checklist: all {len(items)} items pass"]
    counts = ", ".join(f"{sum(i['status'] == status for i in items)} {status}"
                       for status in shown if status != "risk" or any(
                           i["status"] == "risk" for i in items))
    out = [f"  checklist: {counts} (fixes below; `repro-gate doctor`)"]
    for item in sorted(failing, key=lambda i: shown.index(i["status"]))[:MAX_LISTED]:
        out.append(f"    {item['status']}: {item['title']}: {item['fix']}")
    return out


def _reproduce(manifest: dict[str, Any]) -> list[str]:
    """The closing section: what the training lacks to run as the gate ran it."""
    lines = seeding_text.reproduce(manifest)
    if lines is None:
        return []
    if not lines:
        return [f"  {seeding_text.REPRODUCE_HEADING}: {seeding_text.NOTHING_TO_ADD}"]
    return [f"  {seeding_text.REPRODUCE_HEADING}:", *(f"    {line}" for line in lines)]


def _number(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3g}"
