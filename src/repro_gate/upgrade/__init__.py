"""The dependency-upgrade check's foundation: locks, change sets, candidate locks, environments.

    locks.py         a lockfile (uv.lock, pinned requirements) -> `Lock` of `LockedPackage`s
    uv_graph.py      a uv.lock's edges: direct packages, those that apply on this interpreter
    changes.py       `change_set(baseline, candidate)` -> `Change`s; `apply_changes` (mixtures)
    culprits.py      `find_culprits`: delta debugging over the change set (the culprit search)
    candidate.py     the candidate lock: computed by uv in a scratch copy, or given
    environments.py  cached virtual environments built from pins (`LocalEnvironments`)
    docker_environments.py  the same inside the training image, in volumes (Docker mode)
    interpreter.py   what an interpreter sees; pins met (inherit_site_packages)
    installer.py     running uv (pip as the fallback), one-line failures
    base_lock.py     the lock of a pull request's base commit (git objects), the action's baseline

It sits with "the parts": it imports config, errors, parsing, credentials, fingerprint and, for
Docker mode, launch; never cli, gate or publish. `repro-gate upgrade` (the two gates, the
numerics, the trials, the record) is gate/upgrade_check.py, built on top of it.
"""

from __future__ import annotations

from repro_gate.upgrade.candidate import UpgradeRequest, compute_candidate, given_candidate
from repro_gate.upgrade.changes import Change, apply_changes, change_set
from repro_gate.upgrade.culprits import Outcome, Search, Trial, find_culprits
from repro_gate.upgrade.docker_environments import DockerEnvironments
from repro_gate.upgrade.environments import (
    BuildEnvironment,
    Environment,
    LocalEnvironments,
    pins_sha256,
)
from repro_gate.upgrade.locks import Lock, LockedPackage, find_lock, read_lock

__all__ = [
    "BuildEnvironment",
    "Change",
    "DockerEnvironments",
    "Environment",
    "LocalEnvironments",
    "Lock",
    "LockedPackage",
    "Outcome",
    "Search",
    "Trial",
    "UpgradeRequest",
    "apply_changes",
    "change_set",
    "compute_candidate",
    "find_culprits",
    "find_lock",
    "given_candidate",
    "pins_sha256",
    "read_lock",
]
