"""How the statuses of an artifact's parts combine, and the words the resume check shares."""

from __future__ import annotations

import pytest

from repro_gate.compare.status import (
    DIFFERENT,
    EQUAL,
    UNFAILING,
    WITHIN_TOLERANCE,
    Numerics,
    Resume,
    Status,
    worst,
)


def test_nothing_to_combine_is_equal() -> None:
    assert worst([]) is EQUAL


def test_within_tolerance_outranks_equal_and_different_outranks_both() -> None:
    assert worst([EQUAL, WITHIN_TOLERANCE, EQUAL]) is WITHIN_TOLERANCE
    assert worst([WITHIN_TOLERANCE, DIFFERENT, EQUAL]) is DIFFERENT
    assert worst(iter(["equal", "equal"])) is EQUAL


@pytest.mark.parametrize("status", [
    Status.MISSING_IN_A, Status.MISSING_IN_B, Status.SHAPE_MISMATCH, Status.DTYPE_MISMATCH,
    Status.NOT_COMPARED,
])
def test_a_missing_or_mismatched_part_makes_the_artifact_different(status: Status) -> None:
    assert worst([EQUAL, status]) is DIFFERENT


def test_only_equal_and_within_tolerance_leave_a_key_unfailing() -> None:
    assert set(UNFAILING) == {Status.EQUAL, Status.WITHIN_TOLERANCE}
    assert Status.DIFFERENT not in UNFAILING


def test_the_resume_check_speaks_the_words_of_the_upgrade_check() -> None:
    assert [Resume.SAME, Resume.WITHIN_TOLERANCE, Resume.CHANGED] == [
        Numerics.SAME, Numerics.WITHIN_TOLERANCE, Numerics.CHANGED]
    assert Numerics.WITHIN_TOLERANCE == Status.WITHIN_TOLERANCE == "within_tolerance"
    assert Resume.NOT_RUN == "not_run"
