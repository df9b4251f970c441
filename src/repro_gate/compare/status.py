"""Comparison statuses and how they combine into an artifact's status."""

from __future__ import annotations

from collections.abc import Iterable

EQUAL = "equal"
WITHIN_TOLERANCE = "within_tolerance"
DIFFERENT = "different"
MISSING_IN_A = "missing_in_a"
MISSING_IN_B = "missing_in_b"
SHAPE_MISMATCH = "shape_mismatch"
DTYPE_MISMATCH = "dtype_mismatch"

_RANK = {EQUAL: 0, WITHIN_TOLERANCE: 1}


def worst(statuses: Iterable[str]) -> str:
    """The artifact status for its parts: `different` > `within_tolerance` > `equal`.

    Any part that is missing on one side or mismatched in shape or dtype makes it `different`.
    """
    rank = max((_RANK.get(status, 2) for status in statuses), default=0)
    return (EQUAL, WITHIN_TOLERANCE, DIFFERENT)[rank]
