"""The runs that vary one factor of the environment, in the reports: one table under a "vary"
heading (factor, same/changed, step, cause) with a fix per changed factor, and the sentence of
the reason `not_portable`.

Read from `comparison.vary` (the manifest schema's `$defs.vary_result`); tolerant of a manifest
without it (none written before `vary` existed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.status import Vary
from repro_gate.render.diagnosis import LABELS

HEADING = "vary (one factor of the environment at a time, each run against run A)"
# What to change in the training when its numbers follow the factor.
FIXES = {
    "threads": "pin the thread count (torch.set_num_threads(N) and OMP_NUM_THREADS=N)",
    "hostname": "derive nothing from the host name",
    "path": "store relative paths (no absolute path in checkpoints or saved hyperparameters)",
    "time": "seed from a constant, not from the date or the clock",
    "fileordering": "sort the listing (sorted(os.listdir(...)), sorted(glob(...)))",
}
COLUMNS = ("factor", "result", "step", "cause", "fix or note")


def results(comparison: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The entries of `comparison.vary`; empty when the gate varied nothing."""
    found = comparison.get("vary")
    return [entry for entry in found if isinstance(entry, Mapping)] if isinstance(
        found, list) else []


def not_portable_only(manifest: Mapping[str, Any]) -> bool:
    """The gate failed because a varied factor changed the numbers: runs A and B reproduced."""
    codes = {reason.get("code") for reason in manifest.get("reasons") or []}
    return manifest.get("verdict") == "fail" and "not_portable" in codes and codes <= {
        "not_portable", "bitwise_equal", "within_tolerance", "cost_over_budget"}


def changed(comparison: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [entry for entry in results(comparison) if entry.get("status") == Vary.CHANGED]


def reason_text(comparison: Mapping[str, Any]) -> str:
    """`the numbers change with threads (step 3, forward pass diverges): pin the thread count …;
    with path (model.pt: hparams.data_dir): store relative paths …`"""
    parts = [f"{entry['factor']} ({where(entry)}): {FIXES.get(str(entry['factor']), '')}"
             for entry in changed(comparison)]
    return "the numbers change with " + "; with ".join(parts)


def where(entry: Mapping[str, Any]) -> str:
    """Where run V first parts from run A: the step and its cause, else the artifact and the
    first tensor or key path that differs."""
    divergence = entry.get("first_divergence")
    if isinstance(divergence, Mapping):
        cause = LABELS.get(str(divergence.get("cause")), "")
        return f"step {divergence.get('step')}" + (f", {cause}" if cause else "")
    for artifact in entry.get("artifacts") or []:
        names = [*(artifact.get("keys") or []), *(artifact.get("tensors") or [])]
        return f"{artifact['path']}: {names[0]}" if names else str(artifact["path"])
    return "the trajectories' lengths differ"


def row(entry: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """One line of the table: factor (with its two settings), result, step, cause, fix/note."""
    values = entry.get("values") or {}
    setting = f" (A {values['A']}, V {values['V']})" if "A" in values and "V" in values else ""
    status = str(entry.get("status", "")).replace("_", " ")
    divergence = entry.get("first_divergence")
    step, cause = "", ""
    if isinstance(divergence, Mapping):
        step = str(divergence.get("step", ""))
        cause = LABELS.get(str(divergence.get("cause")), "")
    elif entry.get("status") == Vary.CHANGED:
        cause = where(entry)
    fix = FIXES.get(str(entry.get("factor")), "") if entry.get("status") == Vary.CHANGED else ""
    note = "; ".join(text for text in (fix, str(entry.get("note") or "")) if text)
    return f"{entry.get('factor')}{setting}", status, step, cause, note


def lines(comparison: Mapping[str, Any]) -> list[str]:
    """The heading, then one line per factor; none when the gate varied nothing."""
    found = results(comparison)
    if not found:
        return []
    out = [f"{HEADING}:"]
    for entry in found:
        factor, status, step, cause, note = row(entry)
        text = f"{factor}: {status}"
        if step:
            text += f" at step {step}"
        if cause:
            text += f", {cause}"
        if note:
            text += f"; {note}"
        out.append(text)
    return out


def markdown_table(comparison: Mapping[str, Any]) -> str:
    """The same as a Markdown table under its heading; empty when the gate varied nothing."""
    found = results(comparison)
    if not found:
        return ""
    table = [f"**{HEADING[0].upper()}{HEADING[1:]}:**", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for entry in found:
        cells = [cell.replace("|", "\\|") for cell in row(entry)]
        table.append("| " + " | ".join(cells) + " |")
    return "\n".join(table)
