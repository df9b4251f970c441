"""What the gate saw happen: whether the probe loaded in every run, and whether it saw steps.

The probe confirms it loaded with rank 0's status file, written by the run's first Python process
(the owner) from its start and taken over by the process that steps as rank 0; every other rank
that steps writes its own. A run without it was not observed, and no determinism was applied to
it. A Python training without the probe has no verdict: it is the error `probe_not_loaded`,
naming the likely reason read from the command and the fix, whatever the artifacts say. A
training that is not Python can still be judged by its compared artifacts, and says so wherever
its verdict is shown, with the reason; with no artifacts compared it is `probe_not_loaded` too.
A probe that loaded but saw no optimizer step also leaves the verdict to the artifacts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repro_gate.config import Config
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate import command_facts
from repro_gate.gate.training_run import RunRecord
from repro_gate.gate.verdict import Reason, reason
from repro_gate.render.observed import limitation


@dataclass(frozen=True)
class Evidence:
    """What the compared runs observed."""

    probe_loaded: bool  # in the first process of every compared run
    steps_observed: bool  # an optimizer step was recorded in some compared run
    not_loaded: str | None = None  # "run A: <reason>; <fix>" when the probe did not load
    python: bool = True  # the training is Python (read from its command)

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's `evidence`."""
        return {"probe_loaded": self.probe_loaded, "steps_observed": self.steps_observed}


def gather(config: Config, records: list[RunRecord]) -> Evidence:
    """The evidence of the compared runs of a gate."""
    missing = [r.name for r in records if not isinstance(r.probe_status, dict)]
    stepped = any(r.trajectory or r.other_ranks for r in records)
    if not missing:
        return Evidence(True, stepped)
    return unobserved(config, missing, stepped)


def unobserved(config: Config, names: list[str], stepped: bool = False) -> Evidence:
    """The evidence of runs `names` that the probe did not load in, with the reason."""
    facts = command_facts.read(config.command, config.workdir)
    runs = " and ".join(f"run {name}" for name in names)
    return Evidence(False, stepped, f"{runs}: {facts.why_not_loaded}", facts.python)


def check_run(config: Config, record: RunRecord) -> None:
    """Stop after a run that was not observed when nothing it left can decide: a Python
    training, or a run without artifacts."""
    if isinstance(record.probe_status, dict):
        return
    check(unobserved(config, [record.name]), {"artifacts": record.artifacts})


def check(evidence: Evidence | None, comparison: Mapping[str, Any]) -> None:
    """Raise `probe_not_loaded` when a run was not observed and the training is Python, or no
    artifact was compared."""
    if evidence is None or evidence.not_loaded is None:
        return
    if evidence.python:
        raise GateError(f"the probe did not load in {evidence.not_loaded}",
                        kind=ErrorKind.PROBE_NOT_LOADED)
    if not comparison["artifacts"]:
        raise GateError(
            f"the probe did not load in {evidence.not_loaded}; or compare files only"
            " (`artifacts:`, -a GLOB)",
            kind=ErrorKind.PROBE_NOT_LOADED,
        )


def qualify(reasons: list[Reason], evidence: Evidence | None) -> list[Reason]:
    """The verdict's reasons, the first saying when they rest on the artifacts only, and why
    the probe did not load."""
    words = limitation(evidence.to_manifest() if evidence else None)
    if not words or not reasons or evidence is None:
        return reasons
    why = f"; the probe did not load in {evidence.not_loaded}" if evidence.not_loaded else ""
    first = reason(reasons[0]["code"], f"{reasons[0]['message']} ({words}){why}")
    return [first, *reasons[1:]]
