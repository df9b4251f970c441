"""The resume check in words: the console lines and the Markdown paragraph."""

from __future__ import annotations

from typing import Any

from repro_gate.compare.missing_state import sentence
from repro_gate.render.resume_text import lines, paragraph

NOTE = "resumed after step 2, run R first differs at step 4"


def comparison(status: str, missing: dict[str, Any] | None) -> dict[str, Any]:
    return {"resume": {"status": status, "resume_step": 2, "note": NOTE,
                       "missing_state": missing}}


def test_no_resume_check_gives_no_lines_and_no_paragraph() -> None:
    assert lines({"resume": None}) == []
    assert lines({}) == []
    assert paragraph({"resume": None}) == ""


def test_a_changed_resume_names_the_missing_state_without_repeating_its_fix() -> None:
    missing = {"kind": "lr_schedule", "generator": None}
    assert lines(comparison("changed", missing)) == [
        f"resume check: changed, {NOTE}",
        "missing state: lr_schedule",
    ]


def test_within_tolerance_gives_the_fix_on_the_missing_state_line() -> None:
    missing = {"kind": "rng", "generator": "numpy"}
    found = lines(comparison("within_tolerance", missing))
    assert found[0] == f"resume check: within tolerance, {NOTE}"
    assert found[1] == f"missing state: rng (numpy): {sentence(missing)}"
    assert "np.random.set_state()" in found[1]


def test_a_resume_that_matched_has_one_line() -> None:
    assert lines(comparison("same", None)) == [f"resume check: same, {NOTE}"]


def test_the_paragraph_codes_the_kind_and_always_gives_the_fix() -> None:
    missing = {"kind": "rng", "generator": "torch"}
    text = paragraph(comparison("changed", missing))
    assert text == f"changed, {NOTE}. Missing state: `rng` (torch): {sentence(missing)}"


def test_the_paragraph_without_missing_state_is_status_and_note() -> None:
    assert paragraph(comparison("not_run", None)) == f"not run, {NOTE}"
