"""Comparison statuses and how they combine into an artifact's status."""

from __future__ import annotations

from collections.abc import Iterable

from repro_gate.errors import StrEnum


class Status(StrEnum):
    """What comparing an artifact, one of its tensors or keys, or the trajectories found."""

    EQUAL = "equal"
    WITHIN_TOLERANCE = "within_tolerance"
    DIFFERENT = "different"
    MISSING_IN_A = "missing_in_a"
    MISSING_IN_B = "missing_in_b"
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    NOT_COMPARED = "not_compared"  # run B stopped at its first divergent step (fail-fast)
    # Trajectories only: no step recorded on either side; one side took more steps.
    NOT_RECORDED = "not_recorded"
    LENGTH_DIFFERS = "length_differs"


class Numerics(StrEnum):
    """How the numerics of two environments compare (`repro-gate upgrade`'s `numerics.status`):
    the baseline's run against the candidate's."""

    SAME = "same"
    WITHIN_TOLERANCE = Status.WITHIN_TOLERANCE.value
    CHANGED = "changed"
    NOT_COMPARED = Status.NOT_COMPARED.value  # the candidate's own runs did not reproduce


class Resume(StrEnum):
    """How run R, stopped at a checkpoint and resumed, compares with run A
    (`comparison.resume.status`): the words of `Numerics`, and `not_run`."""

    SAME = Numerics.SAME.value
    WITHIN_TOLERANCE = Numerics.WITHIN_TOLERANCE.value
    CHANGED = Numerics.CHANGED.value
    NOT_RUN = "not_run"  # A and B did not agree, or the gate stopped before run R


class Vary(StrEnum):
    """How a run that varies one factor of the environment compares with run A
    (`comparison.vary[].status`)."""

    SAME = Numerics.SAME.value  # equal, or within the gate's tolerance
    CHANGED = Numerics.CHANGED.value
    NOT_RUN = Resume.NOT_RUN.value  # runs A and B differ, or the factor cannot be varied here
    ERROR = "error"  # the run crashed or timed out: nothing is known of the factor


EQUAL = Status.EQUAL
WITHIN_TOLERANCE = Status.WITHIN_TOLERANCE
DIFFERENT = Status.DIFFERENT
MISSING_IN_A = Status.MISSING_IN_A
MISSING_IN_B = Status.MISSING_IN_B
SHAPE_MISMATCH = Status.SHAPE_MISMATCH
DTYPE_MISMATCH = Status.DTYPE_MISMATCH
# A key with one of these statuses does not fail the gate.
UNFAILING = (EQUAL, WITHIN_TOLERANCE)

_RANK: dict[str, int] = {EQUAL: 0, WITHIN_TOLERANCE: 1}


def worst(statuses: Iterable[str]) -> Status:
    """The artifact status for its parts: `different` > `within_tolerance` > `equal`.

    Any part that is missing on one side or mismatched in shape or dtype makes it `different`.
    """
    rank = max((_RANK.get(status, 2) for status in statuses), default=0)
    return (EQUAL, WITHIN_TOLERANCE, DIFFERENT)[rank]
