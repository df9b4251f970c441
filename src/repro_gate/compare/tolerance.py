"""Numeric tolerance for comparing artifacts, chosen per artifact from the `tolerance` section."""

from __future__ import annotations

import fnmatch
import math
import posixpath
from dataclasses import dataclass

from repro_gate.config import ToleranceConfig


@dataclass(frozen=True)
class Tolerance:
    """Two numbers a, b agree when |a - b| <= atol + rtol * |b| (b is run B's value)."""

    atol: float = 0.0
    rtol: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        """Whether `a` and `b` agree within this tolerance; NaN agrees with NaN."""
        if math.isnan(a) and math.isnan(b):
            return True
        return abs(a - b) <= self.atol + self.rtol * abs(b)

    def as_dict(self) -> dict[str, float]:
        """The manifest's `tolerance` object."""
        return {"atol": self.atol, "rtol": self.rtol}


def tolerance_for(policy: ToleranceConfig, rel_path: str) -> Tolerance | None:
    """The tolerance for the artifact at `rel_path`, or None for a bitwise comparison.

    The first `per_artifact` entry whose glob matches the relative path (or its basename) wins;
    values it leaves out come from the top level.
    """
    if policy.bitwise:
        return None
    for entry in policy.per_artifact:
        if artifact_matches(entry.glob, rel_path):
            return Tolerance(
                atol=policy.atol if entry.atol is None else entry.atol,
                rtol=policy.rtol if entry.rtol is None else entry.rtol,
            )
    return Tolerance(atol=policy.atol, rtol=policy.rtol)


def artifact_matches(glob: str, rel_path: str) -> bool:
    """Whether a per-artifact glob matches the relative path or its basename."""
    posix_path = rel_path.replace("\\", "/")
    basename = posixpath.basename(posix_path)
    return fnmatch.fnmatchcase(posix_path, glob) or fnmatch.fnmatchcase(basename, glob)
