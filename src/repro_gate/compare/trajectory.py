"""Compare per-step trajectories recorded by the probe and find the first divergent step.

A multi-process run has one trajectory per rank; each rank is compared with the same rank of the
other run (`compare_ranks`).
"""

from __future__ import annotations

from typing import Any, TypedDict

from repro_gate.compare.cause import Cause, Diagnosis, cause_rank, classify, differing
from repro_gate.compare.status import Status

Trajectory = list[dict[str, Any]]


class _DivergenceAt(TypedDict):
    step: int
    parameters: list[str]
    loss_differs: bool | None
    rank: int
    runs: list[str]
    cause: str


class FirstDivergence(_DivergenceAt, total=False):
    initial_parameters: list[str]
    gradients: list[str]
    buffers: list[str]
    note: str
    # Added by the gate after the comparison: the seeding it saw, run L's module, the op.
    unseeded: dict[str, Any]
    hash_seeds: dict[str, str]  # the runs' PYTHONHASHSEED, when they differ
    module: str | None
    localisation: dict[str, str]
    op: dict[str, Any] | None


class TrajectoryComparison(TypedDict):
    steps_compared: int
    status: Status  # equal | different | not_recorded | length_differs
    steps: dict[str, int]
    first_divergence: FirstDivergence | None


def compare_ranks(
    a: dict[int, Trajectory], b: dict[int, Trajectory], runs: tuple[str, str]
) -> TrajectoryComparison:
    """Compare every rank of `a` with the same rank of `b`, as one comparison.

    The first divergence is where the evidence starts (`divergence_order`).
    `steps_compared` is the fewest steps compared on any rank, `steps` counts the lowest rank's.
    """
    ranks = sorted(a.keys() | b.keys()) or [0]
    results = [compare_trajectories(a.get(r, []), b.get(r, []), runs, rank=r) for r in ranks]
    divergences = [r["first_divergence"] for r in results if r["first_divergence"] is not None]
    statuses = {r["status"] for r in results}
    status = Status.LENGTH_DIFFERS
    if Status.DIFFERENT in statuses:
        status = Status.DIFFERENT
    elif len(statuses) == 1:
        status = statuses.pop()
    return {
        "steps_compared": min(r["steps_compared"] for r in results),
        "status": status,
        "steps": results[0]["steps"],
        "first_divergence": min(divergences, key=divergence_order, default=None),
    }


def divergence_order(divergence: Any) -> tuple[int, int, int]:
    """Earliest step first; at equal step, the earlier cause in the step, then the lowest rank."""
    return divergence["step"], cause_rank(divergence.get("cause")), divergence.get("rank", 0)


def compare_trajectories(
    a: Trajectory, b: Trajectory, runs: tuple[str, str], rank: int = 0
) -> TrajectoryComparison:
    """Walk both trajectories step by step; report the first step whose digests or loss differ.

    A step whose parameters and loss agree but whose buffers do not (a resumed BatchNorm without
    its running statistics) diverges with the cause `buffers`.

    Parameters are listed in model order (the order the probe recorded them in run `a`).
    """
    steps = {runs[0]: len(a), runs[1]: len(b)}
    if not a and not b:
        return {"steps_compared": 0, "status": Status.NOT_RECORDED, "steps": steps,
                "first_divergence": None}
    by_step_b = {entry["step"]: entry for entry in b}
    compared = 0
    for entry_a in a:
        entry_b = by_step_b.get(entry_a["step"])
        if entry_b is None:
            break
        compared += 1
        divergence = _divergence_at(entry_a, entry_b, runs, rank)
        if divergence is not None:
            return {"steps_compared": compared, "status": Status.DIFFERENT, "steps": steps,
                    "first_divergence": divergence}
    status = Status.EQUAL if len(a) == len(b) else Status.LENGTH_DIFFERS
    return {"steps_compared": compared, "status": status, "steps": steps, "first_divergence": None}


def _divergence_at(
    a: dict[str, Any], b: dict[str, Any], runs: tuple[str, str], rank: int
) -> FirstDivergence | None:
    parameters = differing(a.get("params", {}), b.get("params", {}))
    loss_a, loss_b = a.get("loss"), b.get("loss")
    loss_differs = None if loss_a is None or loss_b is None else loss_a != loss_b
    # Records of earlier probes have no buffers: nothing to compare.
    buffers = differing(a.get("buffers") or {}, b.get("buffers") or {}) if (
        "buffers" in a and "buffers" in b) else []
    if not parameters and not loss_differs and not buffers:
        return None
    diagnosis: Diagnosis = {"cause": Cause.BUFFERS} if not parameters and not loss_differs else (
        classify(a, b))
    divergence: FirstDivergence = {
        "step": int(a["step"]), "parameters": parameters, "loss_differs": loss_differs,
        "rank": rank, "runs": list(runs), "cause": diagnosis.get("cause", Cause.UNKNOWN),
    }
    if "initial_parameters" in diagnosis:
        divergence["initial_parameters"] = diagnosis["initial_parameters"]
    if "gradients" in diagnosis:
        divergence["gradients"] = diagnosis["gradients"]
    if "note" in diagnosis:
        divergence["note"] = diagnosis["note"]
    if buffers:
        divergence["buffers"] = buffers
    return divergence
