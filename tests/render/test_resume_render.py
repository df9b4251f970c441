"""The resume check in the reports: the console, the summary and the pull-request comment."""

from __future__ import annotations

import copy
from typing import Any

from repro_gate import validation
from repro_gate.compare.missing_state import sentence
from repro_gate.render import console, markdown

MISSING = {"kind": "lr_schedule", "generator": None}


def with_resume(manifest: dict[str, Any], status: str) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest)
    manifest["comparison"]["resume"] = {
        "status": status, "resume_step": 2, "checkpoint": "/work/runs/R/work/ckpt.pt",
        "first_divergence": {"step": 4, "rank": 0, "cause": "optimizer"},
        "missing_state": MISSING, "note": "resumed after step 2, run R first differs at step 4"}
    manifest["reasons"].append({"code": "resume_changed", "message": "the resume check: …"})
    assert validation.errors("manifest", manifest) == []
    return manifest


def test_every_report_names_the_missing_state_and_its_fix(
    manifest_current: dict[str, Any]
) -> None:
    manifest = with_resume(manifest_current, "changed")
    text = console.render(manifest, None)
    assert "  resume check: changed, resumed after step 2, run R first differs at step 4" in text
    assert "    missing state: lr_schedule\n" in text  # its fix is among the reasons
    for report in (markdown.summary_markdown(manifest), markdown.comment_markdown(manifest)):
        assert "Resume check" in report
        assert sentence(MISSING) in report


def test_within_tolerance_shows_the_fix_on_the_console_line(
    manifest_current: dict[str, Any]
) -> None:
    text = console.render(with_resume(manifest_current, "within_tolerance"), None)
    assert f"    missing state: lr_schedule: {sentence(MISSING)}" in text


def test_no_resume_check_shows_nothing(manifest_current: dict[str, Any]) -> None:
    assert manifest_current["comparison"]["resume"] is None
    assert "resume check" not in console.render(manifest_current, None).lower()
    assert "Resume check" not in markdown.comment_markdown(manifest_current)
