"""Markdown of `repro-gate upgrade` for GitHub: the check-run title, and one report for the PR
comment, the job summary and the check-run summary.

Rendered from `upgrade.json` (validated before it is written), with the same words as the
console (render/upgrade_console.py). Package names, versions, paths and messages come from
outside (lockfiles, installers, trainings): names and paths are shown as code spans, whose fence
is longer than any run of backticks inside, and prose has Markdown's and HTML's characters
escaped and @mentions broken, so a hostile name cannot add links, HTML, mentions or table
columns. The report is cut to GitHub's limit like the gate's own (render/markdown.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from repro_gate.errors import printable
from repro_gate.manifest.upgrade_document import GATE_VERDICTS, UpgradeVerdict
from repro_gate.render.markdown import CHECK_TEXT_LIMIT, VERDICT_ICONS
from repro_gate.render.markdown_text import TABLE_ROWS, cell, more_text, one_line
from repro_gate.render.upgrade_console import (
    MAX_GROUPS,
    Group,
    cause_text,
    compared_text,
    cost_pair,
    culprits_words,
    difference_text,
    divergence_text,
    first_message,
    groups,
    headline,
    kept,
    kept_how,
    members_text,
    nothing_ran_why,
    numerics_text,
    op_text,
    plural,
    reproducibility_text,
    search_text,
    versions_text,
)

CUT_NOTE = "\n\n*… cut here: the full report is in upgrade.json.*\n"
# Characters Markdown or HTML give a meaning to in running text; each is escaped by a backslash.
MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>|~&])")
MENTION = "@\u200b"  # a zero-width space after "@": GitHub notifies nobody


def title(document: Mapping[str, Any]) -> str:
    """One line for the check run's title: the verdict in words and what it points at."""
    verdict = document["verdict"]
    if verdict == UpgradeVerdict.CHANGED:
        found = groups(document)
        if not found:
            return _line(f"numerics changed · {culprits_words(document)}")
        more = f" +{len(found) - 1} more" if len(found) > 1 else ""
        step = found[0].divergence
        where = f" (step {step['step']})" if step is not None else ""
        return _line(f"numerics changed · {members_text(found[0])}{where}{more}")
    if verdict == UpgradeVerdict.SAME:
        if compared_text(document["numerics"]) is None:
            return _line(f"nothing compared · {nothing_ran_why(document)}")
        return _line(f"numerics kept · {kept_how(document['numerics'])}, reproducible")
    if verdict == UpgradeVerdict.NOT_REPRODUCIBLE:
        candidate = document["reproducibility"].get("candidate") or {}
        why = first_message(candidate.get("reasons")) or first_message(document["reasons"])
        return _line(f"candidate not reproducible · {why}")
    return _line(f"could not decide · {first_message(document['reasons'])}")


def report(document: Mapping[str, Any]) -> str:
    """The Markdown report: verdict, why, culprits, reproducibility, cost, the change set."""
    parts = [_heading(document), _verdict_line(document), _why(document), _culprits(document),
             _reasons(document), _kept(document), _reproducibility(document),
             _changes(document), _trials(document)]
    return _cut("\n\n".join(p for p in parts if p) + "\n", CHECK_TEXT_LIMIT)


def code(value: Any, in_table: bool = True) -> str:
    """`value` as an inline code span: nothing inside it is Markdown. In a table, a `|` is
    escaped (GitHub splits cells before it reads code spans); elsewhere it would show its `\\`."""
    # Line breaks become spaces first; the control characters left are shown as escapes.
    text = printable(cell(value) if in_table else one_line(str(value)))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def text(value: Any, limit: int = 400) -> str:
    """`value` as running text on one line: Markdown and HTML characters escaped, no mention."""
    line = printable(one_line(str(value), limit))
    return MARKDOWN_SPECIALS.sub(r"\\\1", line).replace("@", MENTION)


def _line(title_text: str) -> str:
    """A title on one line, its control characters shown as escapes."""
    return printable(one_line(title_text))


def _heading(document: Mapping[str, Any]) -> str:
    icon = VERDICT_ICONS[GATE_VERDICTS[document["verdict"]]]
    return f"### {icon} {text(document['gate'])} upgrade: {text(title(document))}"


def _verdict_line(document: Mapping[str, Any]) -> str:
    changes = document["changes"]
    direct = sum(1 for c in changes if c["direct"])
    line = f"**Verdict:** {document['verdict']} · **Changes:** {len(changes)} ({direct} direct)"
    if document["verdict"] == "error":
        return line
    line += f" · **Numerics:** {text(numerics_text(document['numerics']))}"
    return line + f" · **Culprit search:** {text(search_text(document))}"


def _why(document: Mapping[str, Any]) -> str:
    if document["verdict"] in (UpgradeVerdict.SAME, UpgradeVerdict.ERROR):
        return ""  # the heading says it all, or the reasons below do
    lines = [f"**Why:** {text(headline(document))}."]
    found = groups(document)
    for group in found[:MAX_GROUPS]:
        cause = cause_text(group.divergence) or divergence_text(group.divergence)
        lines.append(f"- {_members(group, in_table=False)}: {text(cause)}")
    if len(found) > MAX_GROUPS:
        lines.append(f"- and {len(found) - MAX_GROUPS} more groups (table below)")
    return "\n".join(lines)


def _culprits(document: Mapping[str, Any]) -> str:
    found = groups(document)
    if not found:
        return ""
    rows = [_culprit_row(index, group) for index, group in enumerate(found[:TABLE_ROWS])]
    return ("**Culprits**\n\n| Packages | First divergence | Cause | Largest artifact difference"
            " |\n|---|---|---|---|\n" + "\n".join(rows) + more_text(len(found), "groups"))


def _culprit_row(index: int, group: Group) -> str:
    together = " (only together)" if len(group.members) > 1 else ""
    return (f"| {_members(group)}{together} | {text(divergence_text(group.divergence))} |"
            f" {text(cause_text(group.divergence)) or 'n/a'} |"
            f" {text(difference_text(group)) or 'n/a'} |")


def _members(group: Group, in_table: bool = True) -> str:
    return " + ".join(
        f"{code(c.name, in_table)} {text(versions_text(c.old, c.new))}" for c in group.members)


def _reasons(document: Mapping[str, Any]) -> str:
    if document["verdict"] == UpgradeVerdict.SAME:
        return ""
    lines = [f"- {code(r['code'], False)}: {text(r['message'])}" for r in document["reasons"]]
    return "**Reasons**\n\n" + "\n".join(lines) if lines else ""


def _kept(document: Mapping[str, Any]) -> str:
    if document["verdict"] != "error":
        return ""
    lines = [f"- {what}: {code(path, False)}" for what, path in kept(document)]
    return "**Kept for a look**\n\n" + "\n".join(lines) if lines else ""


def _reproducibility(document: Mapping[str, Any]) -> str:
    if document["verdict"] == "error":
        return ""
    candidate = document["reproducibility"].get("candidate")
    lines = [f"**Candidate environment:** {text(reproducibility_text(candidate))}"
             f" · **Cost of determinism:** {text(cost_pair(document))}"]
    ops = document["reproducibility"]["new_nondeterministic_ops"]
    if ops:
        rows = [f"| {code(op_text(op))} |" for op in ops[:TABLE_ROWS]]
        lines.append("| New nondeterministic op |\n|---|\n" + "\n".join(rows)
                     + more_text(len(ops), "ops"))
    return "\n\n".join(lines)


def _changes(document: Mapping[str, Any]) -> str:
    changes = sorted(document["changes"], key=lambda c: not c["direct"])
    if not changes:
        return ""
    rows = [
        f"| {code(c['name'])} | {code(c['old'] or '—')} | {code(c['new'] or '—')} | {c['kind']}"
        f" | {'direct' if c['direct'] else 'transitive'}{'' if c['applies'] else ', not installed'}"
        " |"
        for c in changes[:TABLE_ROWS]
    ]
    table = ("| Package | Old | New | Kind | Dependency |\n|---|---|---|---|---|\n"
             + "\n".join(rows) + more_text(len(changes), "changes"))
    return _folded(f"Changes ({len(changes)})", table,
                   open_=document["verdict"] != UpgradeVerdict.SAME)


def _trials(document: Mapping[str, Any]) -> str:
    trials = document["culprit_search"]["trials"]
    if not trials:
        return ""
    rows = [
        f"| {number} | {' '.join(code(p) for p in t['packages']) or '(none)'} | {t['outcome']} |"
        f" {t['step'] if t['step'] is not None else ''} | {text(t.get('note', ''))} |"
        for number, t in enumerate(trials[:TABLE_ROWS], start=1)
    ]
    table = ("| # | Packages from the candidate | Outcome | Step | Note |\n|---|---|---|---|---|\n"
             + "\n".join(rows) + more_text(len(trials), "trials"))
    return _folded(f"Culprit search: {plural(len(trials), 'trial')}", table, open_=False)


def _folded(summary: str, body: str, open_: bool) -> str:
    opened = " open" if open_ else ""
    return f"<details{opened}><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _cut(report_text: str, limit: int) -> str:
    """`report_text` within `limit` characters, closing a <details> the cut leaves open, as
    render/markdown.py's truncate does (its note names manifest.json, this one upgrade.json)."""
    if len(report_text) <= limit:
        return report_text
    note = CUT_NOTE
    head = report_text[: limit - len(note)]
    if head.count("<details") > head.count("</details>"):
        note += "\n</details>\n"
        head = report_text[: limit - len(note)]
    return head + note
