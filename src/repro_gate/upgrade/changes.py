"""The change set between two locks, and the pins of a baseline with some changes applied.

A change is every package whose version differs (by PEP 440: `1.0` and `1.0.0` are the same
version), is added or is removed. Versions that are not PEP 440 (old `setuptools` forms) are
compared as strings: different is then `upgraded` when the new one sorts after the old one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.version import InvalidVersion, Version

from repro_gate.environments.dependency_lock import Lock, LockedPackage

ChangeKind = Literal["upgraded", "downgraded", "added", "removed"]


@dataclass(frozen=True)
class Change:
    """One package that differs between the baseline and the candidate lock."""

    name: str
    old: str | None  # None: added
    new: str | None  # None: removed
    kind: ChangeKind
    direct: bool  # the project asks for it itself (in the baseline; in the candidate if added)
    applies: bool = True  # installed on this interpreter by either lock: it can change a run here


def change_set(baseline: Lock, candidate: Lock) -> list[Change]:
    """Every package that differs between the two locks, sorted by name."""
    changes = []
    for name in sorted(set(baseline.packages) | set(candidate.packages)):
        old, new = baseline.packages.get(name), candidate.packages.get(name)
        kind = _kind(old, new)
        if kind is None:
            continue
        direct = old.direct if old is not None else new is not None and new.direct
        applies = any(p is not None and p.applies for p in (old, new))
        changes.append(Change(name, old.version if old else None, new.version if new else None,
                              kind, direct, applies))
    return changes


def apply_changes(baseline: Lock, candidate: Lock, names: Iterable[str]) -> dict[str, str]:
    """The baseline's pins with the packages `names` taken from the candidate (added, moved,
    or removed when the candidate has none here): the environment in which exactly these
    packages change, which is what the culprit search asks for."""
    pins = baseline.pins()
    for name in names:
        new = candidate.packages.get(name)
        if new is None or not new.applies:
            pins.pop(name, None)
        else:
            pins[name] = new.version
    return dict(sorted(pins.items()))


def _kind(old: LockedPackage | None, new: LockedPackage | None) -> ChangeKind | None:
    if old is None:
        return "added" if new is not None else None
    if new is None:
        return "removed"
    order = _compare(old.version, new.version)
    if order == 0:
        return None
    return "upgraded" if order < 0 else "downgraded"


def _compare(old: str, new: str) -> int:
    """-1, 0 or 1 as `old` is lower than, equal to or higher than `new`."""
    try:
        left, right = Version(old), Version(new)
    except InvalidVersion:
        return (old > new) - (old < new)
    return (left > right) - (left < right)
