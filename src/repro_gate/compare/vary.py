"""A run that varies one factor of the environment against run A: `comparison.vary[]`.

Run V-<factor> is compared with run A exactly as run B is (compare/run_pair.py): the trajectory
step by step with the cause of its first divergence, then the artifacts, tensors by name and
other values by key path. Under a numeric tolerance the artifacts decide, as for B.
"""

from __future__ import annotations

from repro_gate.compare import status
from repro_gate.compare.document import ArtifactResult, VaryArtifact, VaryResult
from repro_gate.compare.run_pair import RunSide, compare_runs
from repro_gate.compare.status import Vary
from repro_gate.config import CompareConfig, ToleranceConfig

Values = dict[str, str | int | None]
# The statuses of a tensor or a key that tell run V from run A.
DIFFERING = (status.DIFFERENT, status.MISSING_IN_A, status.MISSING_IN_B, status.SHAPE_MISMATCH,
             status.DTYPE_MISMATCH)


def compare_vary(factor: str, values: Values, a: RunSide, v: RunSide,
                 tolerance: ToleranceConfig, policy: CompareConfig, note: str = "") -> VaryResult:
    """`same` or `changed`, with where run V first parts from run A and what differs."""
    pair = compare_runs([a, v], tolerance, policy)
    divergence = pair["first_divergence"]
    differing = [_artifact(item) for item in pair["artifacts"]
                 if item["status"] not in (*status.UNFAILING, status.Status.NOT_COMPARED)]
    shorter = pair["trajectory"]["status"] == status.Status.LENGTH_DIFFERS
    changed = bool(differing) or shorter or (divergence is not None and tolerance.bitwise)
    return {
        "factor": factor,
        "status": Vary.CHANGED if changed else Vary.SAME,
        "values": values,
        "first_divergence": None if divergence is None else {
            "step": divergence["step"],
            "cause": divergence["cause"],
            "parameters": list(divergence["parameters"])},
        "artifacts": differing,
        "note": note,
    }


def not_run(factor: str, note: str, values: Values | None = None) -> VaryResult:
    """The factor was not varied: `note` says why in one line."""
    return _without_comparison(factor, Vary.NOT_RUN, note, values)


def error(factor: str, note: str, values: Values) -> VaryResult:
    """Run V crashed or timed out: nothing is known of the factor (never `changed`)."""
    return _without_comparison(factor, Vary.ERROR, note, values)


def _without_comparison(factor: str, outcome: Vary, note: str, values: Values | None
                        ) -> VaryResult:
    return {"factor": factor, "status": outcome, "values": values or {},
            "first_divergence": None, "artifacts": [], "note": note}


def _artifact(item: ArtifactResult) -> VaryArtifact:
    return {
        "path": item["path"],
        "status": item["status"],
        "tensors": [t["name"] for t in item.get("tensors", []) if t["status"] in DIFFERING],
        "keys": [k["key"] for k in item.get("keys", []) if k["status"] in DIFFERING],
    }
