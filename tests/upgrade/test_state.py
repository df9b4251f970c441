"""What `repro-gate upgrade` has learned so far: the changes the search narrows, and the locks
it reads first."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.compare.status import Numerics
from repro_gate.environments import Lock, LockedPackage
from repro_gate.upgrade import Change
from repro_gate.upgrade.state import UpgradeState


def lock(path: str, **versions: str) -> Lock:
    return Lock(Path(path), "uv.lock", "0" * 64,
                {name: LockedPackage(name, version, direct=True)
                 for name, version in versions.items()})


def test_a_new_state_has_compared_nothing_and_reused_nothing() -> None:
    state = UpgradeState(started_at="2030-01-01T00:00:00Z", started=0.0)

    assert state.numerics_status == Numerics.NOT_COMPARED
    assert (state.error, state.search, state.trials, state.comparison) == (None, None, None, None)
    assert state.applicable_names() == []
    assert state.candidate_source == "computed"
    other = UpgradeState(started_at="x", started=0.0)
    state.reused_gates.add("baseline")
    assert other.reused_gates == set()


def test_only_changes_that_apply_here_are_narrowed_by_the_search() -> None:
    state = UpgradeState(started_at="x", started=0.0, changes=[
        Change("numpy", "1.26.4", "2.0.1", "upgraded", direct=True),
        Change("pywin32", "305", "306", "upgraded", direct=False, applies=False),
        Change("rich", None, "13.7.1", "added", direct=True),
    ])

    assert state.applicable_names() == ["numpy", "rich"]


def test_the_locks_are_read_before_they_are_asked_for() -> None:
    state = UpgradeState(started_at="x", started=0.0)

    with pytest.raises(AssertionError, match="the baseline lock is read first"):
        state.baseline_lock()
    with pytest.raises(AssertionError, match="the candidate lock is read first"):
        state.candidate_lock()

    state.baseline, state.candidate = lock("uv.lock", numpy="1.26.4"), lock("c", numpy="2.0.1")
    assert state.baseline_lock().pins() == {"numpy": "1.26.4"}
    assert state.candidate_lock().pins() == {"numpy": "2.0.1"}
