"""Run R, stopped at a checkpoint and resumed, against run A: the manifest's
`comparison.resume` (docs/resume.md).

R's trajectory holds its steps up to the resume point (its first process) and the resumed
process's steps after it, numbered on; both are compared with A's same steps, rank by rank, then
the final artifacts under the gate's tolerance. When they differ, `missing_state` names the
state the resume did not restore (compare/missing_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from repro_gate.compare import status
from repro_gate.compare.document import ResumeComparison
from repro_gate.compare.missing_state import Records, decide, sentence
from repro_gate.compare.run_pair import RunSide, compare_runs
from repro_gate.compare.status import Resume
from repro_gate.config import CompareConfig, ToleranceConfig


@dataclass(frozen=True)
class ResumePoint:
    """Where run R's first process stopped: the checkpoint's step and its path."""

    step: int
    checkpoint: str


@dataclass
class ResumeEvidence:
    """What runs A and R recorded: their sides, and the state each step begins with."""

    a: RunSide
    r: RunSide
    states_a: Records
    states_r: Records


def not_run(note: str) -> ResumeComparison:
    """The resume check was configured but did not run (`note` says why)."""
    return {"status": Resume.NOT_RUN, "resume_step": None, "checkpoint": None,
            "first_divergence": None, "missing_state": None, "note": note}


def compare_resume(evidence: ResumeEvidence, point: ResumePoint, tolerance: ToleranceConfig,
                   policy: CompareConfig) -> ResumeComparison:
    """Compare R with A: every step (a step recorded twice counts its last record), then the
    artifacts; name the missing state when they differ."""
    r = replace(evidence.r, trajectory=last_records(evidence.r.trajectory),
                other_ranks={rank: last_records(steps)
                             for rank, steps in evidence.r.other_ranks.items()})
    pair = compare_runs([evidence.a, r], tolerance, policy)
    divergence = pair["first_divergence"]
    artifacts = pair["artifacts"]
    failing = [item["path"] for item in artifacts
               if item["status"] not in (*status.UNFAILING, status.Status.NOT_COMPARED)]
    shorter = pair["trajectory"]["status"] == status.Status.LENGTH_DIFFERS
    bitwise_divergence = divergence is not None and tolerance.bitwise
    result: ResumeComparison = {
        "status": Resume.SAME, "resume_step": point.step, "checkpoint": point.checkpoint,
        "first_divergence": None if divergence is None else {
            "step": divergence["step"], "rank": divergence["rank"],
            "cause": str(divergence["cause"])},
        "missing_state": None, "note": "",
    }
    if failing or shorter or bitwise_divergence:
        result["status"] = Resume.CHANGED
    elif divergence is not None or any(item["status"] == status.WITHIN_TOLERANCE
                                       for item in artifacts):
        result["status"] = Resume.WITHIN_TOLERANCE
    if result["status"] != Resume.SAME:
        result["missing_state"] = decide(evidence.states_a, evidence.states_r,
                                         evidence.a.trajectories(), r.trajectories(), point.step)
    result["note"] = _note(result, pair["trajectory"]["steps_compared"], failing, shorter)
    return result


def last_records(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records in step order, a step recorded twice (before the stop and after the resume)
    keeping its last record."""
    by_step = {record.get("step"): record for record in steps}
    return [record for step, record in by_step.items() if isinstance(step, int)]


def _note(result: ResumeComparison, steps: int, failing: list[str], shorter: bool) -> str:
    resumed = f"resumed after step {result['resume_step']}"
    if result["status"] == Resume.SAME:
        return f"{resumed}, run R matches run A bitwise ({steps} steps and the artifacts)"
    if result["status"] == Resume.WITHIN_TOLERANCE:
        return f"{resumed}, run R matches run A within the tolerance, not bitwise"
    where = []
    divergence = result["first_divergence"]
    if divergence is not None:
        where.append(f"first differs at step {divergence['step']}"
                     + (f" on rank {divergence['rank']}" if divergence["rank"] else ""))
    if shorter:
        where.append("took a different number of steps")
    if failing:
        where.append(f"{', '.join(failing)} differ")
    return f"{resumed}, run R {'; '.join(where) or 'differs'}"


def headline(resume: ResumeComparison) -> str:
    """The note, then the sentence naming the missing state and its fix, when there is one."""
    missing = resume["missing_state"]
    return f"{resume['note']}: {sentence(missing)}" if missing else resume["note"]
