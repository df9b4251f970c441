"""`repro-gate upgrade`: the dependency-upgrade check, a feature that drives the gate.

    check.py      `run_upgrade`: the gate in the baseline's and the candidate's environment,
                  their numerics compared, the culprit search, the record
    trials.py     `Trials`: the search's fail-fast runs with some packages moved; confirmations
    state.py      what the check learned
    record.py     upgrade.json from it
    candidate.py  the candidate lock: computed by uv in a scratch copy, or given
    changes.py    `change_set(baseline, candidate)` -> `Change`s; `apply_changes` (mixtures)
    culprits.py   `find_culprits`: delta debugging over the change set (the culprit search)
    base_lock.py  the lock of a pull request's base commit (git objects), the action's baseline

It sits above gate/; the environments it builds and runs in are environments/, below gate/.
"""

from __future__ import annotations

from repro_gate.upgrade.candidate import UpgradeRequest, compute_candidate, given_candidate
from repro_gate.upgrade.changes import Change, apply_changes, change_set
from repro_gate.upgrade.culprits import Outcome, Search, Trial, find_culprits

__all__ = [
    "Change",
    "Outcome",
    "Search",
    "Trial",
    "UpgradeRequest",
    "apply_changes",
    "change_set",
    "compute_candidate",
    "find_culprits",
    "given_candidate",
]
