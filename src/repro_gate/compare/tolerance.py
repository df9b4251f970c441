"""Numeric tolerance for comparing artifacts, chosen per artifact from the config's `tolerance`."""

from __future__ import annotations

import fnmatch
import math
import posixpath
from dataclasses import dataclass
from typing import Any


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


def tolerance_for(config_tolerance: str | dict[str, Any] | None, rel_path: str) -> Tolerance | None:
    """The tolerance for the artifact at `rel_path`, or None for a bitwise comparison.

    The first `per_artifact` entry whose glob matches the relative path (or its basename) wins;
    values it leaves out come from the top level.
    """
    if config_tolerance is None or config_tolerance == "bitwise":
        return None
    if not isinstance(config_tolerance, dict):
        raise ValueError(f"tolerance must be 'bitwise' or a mapping, not {config_tolerance!r}")
    atol = float(config_tolerance.get("atol", 0.0))
    rtol = float(config_tolerance.get("rtol", 0.0))
    posix_path = rel_path.replace("\\", "/")
    basename = posixpath.basename(posix_path)
    for entry in config_tolerance.get("per_artifact", []):
        glob = entry["glob"]
        if fnmatch.fnmatchcase(posix_path, glob) or fnmatch.fnmatchcase(basename, glob):
            return Tolerance(
                atol=float(entry.get("atol", atol)), rtol=float(entry.get("rtol", rtol))
            )
    return Tolerance(atol=atol, rtol=rtol)
