"""What `repro-gate upgrade` has learned so far: the record `upgrade.json` is built from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from repro_gate.compare.document import Comparison
from repro_gate.compare.status import Numerics
from repro_gate.environments import Environment, Lock
from repro_gate.errors import GateError
from repro_gate.gate.pipeline import GateOutcome
from repro_gate.upgrade import Change, UpgradeRequest
from repro_gate.upgrade.culprits import Search
from repro_gate.upgrade.trials import TrialRun, Trials

Role = Literal["baseline", "candidate"]


@dataclass
class UpgradeState:
    started_at: str
    started: float  # monotonic
    baseline: Lock | None = None
    candidate: Lock | None = None
    candidate_source: Literal["computed", "given"] = "computed"
    request: UpgradeRequest | None = None  # computed: what was asked
    candidate_kept: Path | None = None  # the candidate lock's copy in the output directory
    changes: list[Change] = field(default_factory=list)
    environments: dict[Role, Environment] = field(default_factory=dict)
    gates: dict[Role, GateOutcome] = field(default_factory=dict)
    gate_keys: dict[Role, str] = field(default_factory=dict)  # their cache keys
    reused_gates: set[Role] = field(default_factory=set)  # read back from the cache
    comparison: Comparison | None = None  # baseline run A against candidate run A
    numerics_status: Numerics = Numerics.NOT_COMPARED
    trials: Trials | None = None
    search: Search | None = None
    confirmations: list[TrialRun] = field(default_factory=list)  # one per culprit group
    error: GateError | None = None

    def applicable_names(self) -> list[str]:
        """The changes that can change a run on this interpreter: what the search narrows."""
        return [change.name for change in self.changes if change.applies]

    def baseline_lock(self) -> Lock:
        assert self.baseline is not None, "the baseline lock is read first"
        return self.baseline

    def candidate_lock(self) -> Lock:
        assert self.candidate is not None, "the candidate lock is read first"
        return self.candidate
