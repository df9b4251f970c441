"""Numeric tolerance for comparing artifacts, chosen per artifact from the `tolerance` section.

The rule, defined once here for every comparison the gate makes (tensors, JSON/YAML numbers,
the upgrade check's losses): a (run A's value) and b (run B's) agree when

    |a - b| <= atol + rtol * |b|

with these values that have no finite difference: NaN agrees with NaN (a training that yields
NaN twice reproduces); +inf agrees with +inf only, and -inf with -inf only (never with a finite
number, however large rtol * |b| is). -0.0 and +0.0 agree. `agree` is the rule on arrays; a
pair of numbers goes through the same code. The probe, which cannot import repro_gate, keeps
its own copy for fail-fast under a tolerance; tests/probe/test_probe_contract.py holds it to
this one.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass

import numpy as np

from repro_gate.config import ToleranceConfig


def agree(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Element by element, whether a and b agree within atol and rtol (see the module)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):  # inf - inf and overflow are judged here, not warned
        both_nan = np.isnan(a) & np.isnan(b)
        infinite = np.isinf(a) | np.isinf(b)
        close = magnitude(a - b) <= atol + rtol * magnitude(b)
    agreed: np.ndarray = both_nan | np.where(infinite, a == b, close)
    return agreed


def magnitude(values: np.ndarray) -> np.ndarray:
    """|values|; complex ones through hypot, as torch computes them (numpy's abs differs in the
    last bit for some)."""
    result: np.ndarray = (np.hypot(values.real, values.imag) if values.dtype.kind == "c"
                          else np.abs(values))
    return result


@dataclass(frozen=True)
class Tolerance:
    """Two numbers a, b agree when |a - b| <= atol + rtol * |b| (b is run B's value)."""

    atol: float = 0.0
    rtol: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        """Whether the numbers `a` and `b` agree within this tolerance (`agree`)."""
        return bool(agree(np.float64(a), np.float64(b), self.atol, self.rtol))

    def allows_all(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether every pair of elements of `a` and `b` agrees within this tolerance."""
        return bool(agree(a, b, self.atol, self.rtol).all())

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
