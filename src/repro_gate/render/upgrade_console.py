"""The console report of `repro-gate upgrade`: what a person reads in ten seconds.

Line 1 is the verdict in words; then, for a numerics change, each culprit (package old -> new,
the first divergent step, its parameters, the cause, the largest artifact difference); the
change set; the candidate's reproducibility and cost; the culprit search; the file's path. For
an error: the reason and what was kept.

The document is `upgrade.json` (schemas/upgrade.schema.json), validated before it is written.
Package names, versions and messages come from outside (lockfiles, installers, trainings), so
every line is printed with its control characters escaped. The reading of the document into
typed pieces (`Group`, `headline`, ...) is shared with the Markdown report
(render/markdown_upgrade.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repro_gate.compare.status import Numerics
from repro_gate.compare.structured import is_number
from repro_gate.errors import printable
from repro_gate.manifest.upgrade_document import UpgradeVerdict
from repro_gate.render import cost_text
from repro_gate.render.diagnosis import headline as cause_headline
from repro_gate.render.diagnosis import names_text, op_location

PREFIX = "repro-gate upgrade"
MAX_PARAMETERS = 3  # parameter names of a first divergence before "and N more"
MAX_CHANGES = 10  # changes listed one a line; beyond this, the direct ones and a count
MAX_OPS = 5  # new nondeterministic ops listed
MAX_GROUPS = 5  # culprit groups shown with their evidence
VERDICT_WORDS = {
    UpgradeVerdict.SAME: "SAME",
    UpgradeVerdict.CHANGED: "CHANGED",
    UpgradeVerdict.NOT_REPRODUCIBLE: "NOT REPRODUCIBLE",
    UpgradeVerdict.ERROR: "ERROR",
}
SEARCH_WORDS = {
    "found": "found",
    "not_needed": "not needed",
    "incomplete": "incomplete: its bound was reached before it could decide",
    "not_found": "no subset of the changes reproduced the change",
}


@dataclass(frozen=True)
class Culprit:
    """One package of a culprit group, as the change set names it."""

    name: str
    old: str | None
    new: str | None
    kind: str


@dataclass(frozen=True)
class Group:
    """Packages that change the numerics together (one package: alone), with the evidence of
    the group's confirmation run against baseline run A."""

    members: tuple[Culprit, ...]
    divergence: Mapping[str, Any] | None
    max_abs_diff: float | None
    max_rel_diff: float | None
    max_ulp_diff: int | None
    artifact: str | None


def render(document: Mapping[str, Any], shown_path: str | None) -> str:
    """The report, one line each fact; `shown_path` is upgrade.json as the user should see it."""
    verdict = document["verdict"]
    lines = [f"{PREFIX}: {VERDICT_WORDS[verdict]}: {headline(document)}"]
    if verdict == "error":
        lines += _error_lines(document)
    else:
        lines += _numerics_lines(document)
        lines += _groups_lines(groups(document))
        lines += _changes_lines(document["changes"])
        lines += _reproducibility_lines(document)
        lines.append(f"  culprit search: {search_text(document)}")
    if shown_path:
        lines.append(f"  report: {shown_path}")
    return "\n".join(printable(line) for line in lines)


def headline(document: Mapping[str, Any]) -> str:
    """The verdict in words, without the verdict's label."""
    verdict = document["verdict"]
    if verdict == UpgradeVerdict.SAME:
        compared = compared_text(document["numerics"])
        if compared is None:
            return f"nothing was compared: {nothing_ran_why(document)}"
        how = kept_how(document["numerics"])
        return (f"the upgrade keeps the numerics {how} ({compared})"
                " and the training reproducible")
    if verdict == UpgradeVerdict.CHANGED:
        return "numerics changed: " + culprits_words(document)
    if verdict == UpgradeVerdict.NOT_REPRODUCIBLE:
        changed = document["numerics"]["status"] == Numerics.CHANGED
        also = ", and its numerics changed" if changed else ""
        return f"the training is not reproducible in the candidate environment{also}"
    return "the upgrade check could not decide"


def kept_how(numerics: Mapping[str, Any]) -> str:
    """How numerics that are the same are the same: `bit for bit`, `within tolerance`, or
    `not compared` when no step and no artifact was."""
    if compared_text(numerics) is None:
        return "not compared"
    return "within tolerance" if numerics["status"] == Numerics.WITHIN_TOLERANCE else "bit for bit"


def compared_text(numerics: Mapping[str, Any]) -> str | None:
    """`6 steps and 1 artifact compared`; None when nothing was (no run, or no evidence)."""
    comparison = numerics.get("comparison")
    if numerics["status"] == Numerics.NOT_COMPARED or not isinstance(comparison, Mapping):
        return None
    steps = int(comparison.get("trajectory", {}).get("steps_compared") or 0)
    files = len(comparison.get("artifacts") or [])
    parts = [plural(count, noun) for count, noun in ((steps, "step"), (files, "artifact"))
             if count]
    return " and ".join(parts) + " compared" if parts else None


def nothing_ran_why(document: Mapping[str, Any]) -> str:
    """Why a `same` verdict compared nothing."""
    changes = document["changes"]
    if not changes:
        return "the two locks pin the same versions"
    if not any(change["applies"] for change in changes):
        return "no change applies on this interpreter, so nothing ran"
    return "the runs recorded no step and no artifact"


def groups(document: Mapping[str, Any]) -> list[Group]:
    """The culprit groups in the order of their index; evidence from each group's first entry."""
    found: dict[int, list[Mapping[str, Any]]] = {}
    for culprit in document.get("culprits", []):
        found.setdefault(int(culprit["group"]), []).append(culprit)
    return [_group(found[index]) for index in sorted(found)]


def change_text(name: str, old: str | None, new: str | None) -> str:
    """`numpy 1.26.4 -> 2.0.0`, `numpy (added, 2.0.0)`, `numpy 1.26.4 (removed)`."""
    return f"{name} {versions_text(old, new)}"


def versions_text(old: str | None, new: str | None) -> str:
    """`1.26.4 -> 2.0.0`, `(added, 2.0.0)`, `1.26.4 (removed)`."""
    if old is None:
        return f"(added, {new})"
    if new is None:
        return f"{old} (removed)"
    return f"{old} -> {new}"


def members_text(group: Group) -> str:
    """`a 1 -> 2`, or `a 1 -> 2 + b 3 -> 4` for packages that act together."""
    return " + ".join(change_text(c.name, c.old, c.new) for c in group.members)


def divergence_text(divergence: Mapping[str, Any] | None) -> str:
    """`step 3, parameters fc.weight, fc.bias, head.weight and 2 more`."""
    if divergence is None:
        return "none: the trajectories agree, only artifacts differ"
    parameters = names_text(divergence.get("parameters"), limit=MAX_PARAMETERS)
    return f"step {divergence['step']}" + (f", parameters {parameters}" if parameters else
                                           ", the loss only")


def cause_text(divergence: Mapping[str, Any] | None) -> str:
    """Where in the step the change starts: `forward pass diverges at step 3 (module body.1)`.

    diagnosis.headline, not diagnosis.explain: explain's fixes point at unseeded randomness,
    which is not what makes two package versions compute differently.
    """
    if divergence is None:
        return ""
    return cause_headline(divergence, _multi_rank(divergence))


def difference_text(group: Group) -> str:
    """`max abs 0.0015, max rel 0.0002, max ULP 40 (in model.pt: fc.weight)`; empty without
    any figure."""
    figures = [
        f"{label} {_number(value)}"
        for label, value in (("max abs", group.max_abs_diff), ("max rel", group.max_rel_diff),
                             ("max ULP", group.max_ulp_diff))
        if value is not None
    ]
    where = f" (in {group.artifact})" if group.artifact else ""
    return ", ".join(figures) + where if figures else ""


def cost_pair(document: Mapping[str, Any]) -> str:
    """`baseline +3.1% (95% interval …) -> candidate +4.0% (…)`; a figure only when measured."""
    summaries = document["reproducibility"]
    sides = [_cost_side(summaries.get(side)) for side in ("baseline", "candidate")]
    if sides == ["not measured", "not measured"]:
        return "not measured"
    return f"baseline {sides[0]} -> candidate {sides[1]}"


def search_text(document: Mapping[str, Any]) -> str:
    """`5 runs (max 32), found`: the culprit search in words."""
    search = document["culprit_search"]
    text = f"{plural(search['runs'], 'run')} (max {search['max_runs']})"
    text += f", {SEARCH_WORDS.get(search['status'], search['status'])}"
    note = search.get("note")
    return text + (f": {note}" if note else "")


def reproducibility_text(summary: Mapping[str, Any] | None) -> str:
    """The candidate's ordinary gate in words: `reproducible`, `not reproducible: <reason>`."""
    if summary is None:
        return "not checked (the gate did not run in this environment)"
    reason = first_message(summary.get("reasons", []))
    if summary["verdict"] == "pass":
        return "reproducible (its own gate passes)"
    if summary["verdict"] == "fail":
        return "not reproducible" + (f": {reason}" if reason else "")
    return "gate error" + (f": {reason}" if reason else "")


def numerics_text(numerics: Mapping[str, Any]) -> str:
    """`changed (bitwise)`, `within tolerance (atol 1e-06, rtol 1e-05)`, ..."""
    status = str(numerics["status"]).replace("_", " ")
    if numerics["status"] == Numerics.NOT_COMPARED:
        return status
    return f"{status} ({tolerance_text(numerics['tolerance'])})"


def tolerance_text(tolerance: Any) -> str:
    """`bitwise`, or `atol 1e-06, rtol 1e-05` (and how many artifact globs have their own)."""
    if not isinstance(tolerance, Mapping):
        return "bitwise"
    text = f"atol {tolerance.get('atol', 0.0):g}, rtol {tolerance.get('rtol', 0.0):g}"
    own = len(tolerance.get("per_artifact", []))
    return text + (f", {own} per-artifact override{'' if own == 1 else 's'}" if own else "")


def op_text(op: Mapping[str, Any]) -> str:
    """`aten::index_add_ at train.py:12`."""
    where = op_location(op)
    return str(op["op"]) + (f" at {where}" if where else "")


def kept(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What an error left behind for a person to look at: (what, path) pairs."""
    found = []
    for side in ("baseline", "candidate"):
        summary = document["reproducibility"].get(side)
        if summary and summary.get("manifest"):
            found.append((f"{side} manifest", str(summary["manifest"])))
    lock = document["candidate"].get("lock")
    if lock:
        found.append(("candidate lock", str(lock)))
    return found


def first_message(reasons: Any) -> str:
    """The first reason's message on one line; empty without one."""
    for reason in reasons if isinstance(reasons, list) else []:
        message = reason.get("message") if isinstance(reason, Mapping) else None
        if isinstance(message, str) and message.strip():
            return " ".join(message.split())
    return ""



def culprits_words(document: Mapping[str, Any]) -> str:
    """`1 of 3 upgraded packages is responsible`, or why no package is named."""
    found = groups(document)
    if not found:
        status = document["culprit_search"]["status"]
        return "no package named: the culprit search " + (
            "reached its bound" if status == "incomplete" else "found no subset that does it")
    changes = [c for c in document["changes"] if c["applies"]]
    noun = "upgraded" if all(c["kind"] == "upgraded" for c in changes) else "changed"
    count = sum(len(g.members) for g in found)
    of = f"{count} of {plural(len(changes), noun + ' package')}"
    if count == 1:
        return f"{of} is responsible"
    together = " together" if len(found) == 1 else f", in {len(found)} independent groups"
    return f"{of} are responsible{together}"


def _group(entries: list[Mapping[str, Any]]) -> Group:
    first = entries[0]
    members = tuple(Culprit(str(e["name"]), e["old"], e["new"], str(e["kind"])) for e in entries)
    return Group(members, first.get("first_divergence"), first.get("max_abs_diff"),
                 first.get("max_rel_diff"), first.get("max_ulp_diff"), first.get("artifact"))


def _groups_lines(found: list[Group]) -> list[str]:
    lines = [line for group in found[:MAX_GROUPS] for line in _group_lines(group)]
    if len(found) > MAX_GROUPS:
        lines.append(f"  and {len(found) - MAX_GROUPS} more culprit groups (see the report)")
    return lines


def _group_lines(group: Group) -> list[str]:
    label = "culprit" if len(group.members) == 1 else "culprits (only together)"
    lines = [f"  {label}: {members_text(group)}",
             f"    first divergence: {divergence_text(group.divergence)}"]
    cause = cause_text(group.divergence)
    if cause:
        lines.append(f"    cause: {cause}")
    difference = difference_text(group)
    if difference:
        lines.append(f"    largest artifact difference: {difference}")
    return lines


def _numerics_lines(document: Mapping[str, Any]) -> list[str]:
    compared = numerics_text(document["numerics"])
    return [f"  numerics (baseline run A vs candidate run A): {compared}"]


def _changes_lines(changes: list[Mapping[str, Any]]) -> list[str]:
    if not changes:
        return ["  changes: none (the two locks pin the same versions)"]
    direct = [c for c in changes if c["direct"]]
    ordered = direct + [c for c in changes if not c["direct"]]
    lines = [f"  changes: {plural(len(changes), 'package')} ({len(direct)} direct,"
             f" {len(changes) - len(direct)} transitive)"]
    shown = ordered if len(changes) <= MAX_CHANGES else direct[:MAX_CHANGES]
    lines += [f"    {_change_line(change)}" for change in shown]
    if len(shown) < len(changes):
        lines.append(f"    and {len(changes) - len(shown)} more (see the report)")
    return lines


def _change_line(change: Mapping[str, Any]) -> str:
    """`numpy 1.26.4 -> 2.0.0 (upgraded, direct)`, `six 1.16.0 (removed, transitive)`."""
    old, new = change["old"], change["new"]
    versions = f"{old} -> {new}" if old is not None and new is not None else old or new
    facts = [str(change["kind"]), "direct" if change["direct"] else "transitive"]
    if not change["applies"]:
        facts.append("not installed on this interpreter")
    return f"{change['name']} {versions} ({', '.join(facts)})"


def _reproducibility_lines(document: Mapping[str, Any]) -> list[str]:
    reproducibility = document["reproducibility"]
    lines = [f"  candidate: {reproducibility_text(reproducibility.get('candidate'))}"]
    ops = reproducibility["new_nondeterministic_ops"]
    lines += [f"    new nondeterministic op: {op_text(op)}" for op in ops[:MAX_OPS]]
    if len(ops) > MAX_OPS:
        lines.append(f"    and {len(ops) - MAX_OPS} more new nondeterministic ops")
    lines.append(f"  cost of determinism: {cost_pair(document)}")
    return lines


def _error_lines(document: Mapping[str, Any]) -> list[str]:
    lines = [f"  {r['code']}: {' '.join(str(r['message']).split())}" for r in document["reasons"]]
    lines += [f"  kept: {what} {path}" for what, path in kept(document)]
    return lines


def _cost_side(summary: Any) -> str:
    view = cost_text.read(summary.get("cost")) if isinstance(summary, Mapping) else None
    return "not measured" if view is None else cost_text.short_figure(view)


def _multi_rank(divergence: Mapping[str, Any]) -> bool:
    rank = divergence.get("rank")
    return is_number(rank) and rank > 0


def _number(value: float) -> str:
    return f"{value:.3g}"


def plural(count: int, noun: str) -> str:
    """`1 run`, `2 runs`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
