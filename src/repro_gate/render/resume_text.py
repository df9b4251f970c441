"""The resume check in the reports: its status, where run R differed, the missing state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.missing_state import sentence
from repro_gate.compare.status import Resume


def lines(comparison: Mapping[str, Any]) -> list[str]:
    """`resume check: <status>, <note>`, and the missing state with its fix (the reasons carry
    the fix already when the check failed the gate); none when the check is not configured."""
    resume = comparison.get("resume")
    if not resume:
        return []
    status = str(resume["status"]).replace("_", " ")
    out = [f"resume check: {status}, {resume['note']}"]
    missing = resume.get("missing_state")
    if missing:
        named = missing["kind"] + (f" ({missing['generator']})" if missing["generator"] else "")
        fix = "" if resume["status"] == Resume.CHANGED else f": {sentence(missing)}"
        out.append(f"missing state: {named}{fix}")
    return out


def paragraph(comparison: Mapping[str, Any]) -> str:
    """The check in one Markdown line: status, note, the missing state and its fix;
    empty when the check is not configured."""
    resume = comparison.get("resume")
    if not isinstance(resume, Mapping):
        return ""
    text = f"{str(resume['status']).replace('_', ' ')}, {resume['note']}"
    missing = resume.get("missing_state")
    if missing:
        named = f"`{missing['kind']}`" + (f" ({missing['generator']})"
                                          if missing["generator"] else "")
        text += f". Missing state: {named}: {sentence(missing)}"
    return text
