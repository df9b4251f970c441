"""Compare deterministic runs with each other: trajectories first, then artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro_gate.compare import compare_artifact, sha256_file, tolerance_for
from repro_gate.compare.document import ArtifactResult, Comparison
from repro_gate.compare.fields import patterns_for
from repro_gate.compare.status import Status
from repro_gate.compare.trajectory import TrajectoryComparison, compare_ranks, divergence_order
from repro_gate.config import CompareConfig, ToleranceConfig
from repro_gate.errors import ErrorKind, GateError

NOTHING_IGNORED = CompareConfig()


@dataclass
class RunSide:
    """What one run offers for comparison."""

    name: str
    trajectory: list[dict[str, Any]]
    artifacts: dict[str, Path]  # relative path -> file
    stopped: str | None = None  # set when the probe stopped the run early
    digests: dict[str, str] = field(default_factory=dict)  # files known only by sha256
    notes: dict[str, str] = field(default_factory=dict)  # why a file is known only by sha256
    other_ranks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # rank >= 1

    def trajectories(self) -> dict[int, list[dict[str, Any]]]:
        """Every rank's trajectory, by rank (`trajectory` is rank 0's)."""
        rank0 = {0: self.trajectory} if self.trajectory or not self.other_ranks else {}
        return {**rank0, **self.other_ranks}

    def paths(self) -> set[str]:
        """Every artifact's relative path, whether the file or only its digest is at hand."""
        return self.artifacts.keys() | self.digests.keys()


def compare_runs(
    sides: list[RunSide], tolerance: ToleranceConfig, policy: CompareConfig = NOTHING_IGNORED
) -> Comparison:
    """Compare the first run with every other one; the manifest's `comparison` section.

    `policy.ignore` names JSON/YAML fields that are not compared.
    """
    comparison = empty_comparison(tolerance)
    if len(sides) < 2:
        return comparison
    first = sides[0]
    by_rank = {side.name: side.trajectories() for side in sides}
    comparison["trajectory"]["steps"] = {
        name: len(ranks[min(ranks)]) if ranks else 0 for name, ranks in by_rank.items()
    }
    ranks = max(len(ranks) for ranks in by_rank.values())
    if ranks > 1:
        comparison["trajectory"]["ranks"] = ranks
    for other in sides[1:]:
        pair = (first.name, other.name)
        trajectory = compare_ranks(by_rank[first.name], by_rank[other.name], pair)
        _merge_trajectory(comparison, trajectory)
        comparison["artifacts"].extend(_compare_artifacts(first, other, tolerance, policy))
    return comparison


def empty_comparison(tolerance: ToleranceConfig) -> Comparison:
    """A comparison with nothing in it yet."""
    return {
        "basis": "bitwise" if tolerance.bitwise else "tolerance",
        "artifacts": [],
        "trajectory": {"steps_compared": 0, "status": Status.NOT_RECORDED, "steps": {}},
        "first_divergence": None,
    }


def check_something_compared(comparison: Comparison) -> None:
    """A gate that compared neither steps nor files proves nothing: that is an error."""
    if comparison["trajectory"]["status"] == Status.NOT_RECORDED and not comparison["artifacts"]:
        raise GateError(
            "nothing to compare: the runs wrote no artifacts and no optimizer step was seen"
            " (set `artifacts:` to the files your training writes)",
            kind=ErrorKind.NOTHING_TO_COMPARE,
        )


def _merge_trajectory(comparison: Comparison, trajectory: TrajectoryComparison) -> None:
    current = comparison["trajectory"]
    compared = trajectory["steps_compared"]
    first_pair = current["status"] == Status.NOT_RECORDED
    current["steps_compared"] = compared if first_pair else min(current["steps_compared"], compared)
    if current["status"] != Status.DIFFERENT:
        current["status"] = trajectory["status"]
    divergence = trajectory["first_divergence"]
    known = comparison["first_divergence"]
    if divergence and (known is None or divergence_order(divergence) < divergence_order(known)):
        comparison["first_divergence"] = divergence


def _compare_artifacts(
    a: RunSide, b: RunSide, tolerance: Any, policy: CompareConfig
) -> list[ArtifactResult]:
    results: list[ArtifactResult] = []
    for rel in sorted(a.paths() | b.paths()):
        item: ArtifactResult
        if b.stopped is not None:
            item = {"path": rel, "kind": "bytes", "status": Status.NOT_COMPARED,
                    "note": f"run {b.name} was stopped at its first divergent step (fail-fast)"}
        elif rel not in a.paths():
            item = {"path": rel, "kind": "bytes", "status": Status.MISSING_IN_A}
        elif rel not in b.paths():
            item = {"path": rel, "kind": "bytes", "status": Status.MISSING_IN_B}
        elif rel in a.digests or rel in b.digests:
            item = _compare_digests(_digest(a, rel), _digest(b, rel), rel)
            why = [side.notes[rel] for side in (a, b) if rel in side.notes]
            item["note"] = "; ".join([item["note"], *why])
        else:
            item = compare_artifact(a.artifacts[rel], b.artifacts[rel], rel,
                                    tolerance_for(tolerance, rel), patterns_for(policy, rel))
        item["runs"] = [a.name, b.name]
        results.append(item)
    return results


def _digest(side: RunSide, rel: str) -> str:
    return side.digests[rel] if rel in side.digests else sha256_file(side.artifacts[rel])


def _compare_digests(digest_a: str, digest_b: str, rel: str) -> ArtifactResult:
    return {
        "path": rel,
        "kind": "bytes",
        "status": Status.EQUAL if digest_a == digest_b else Status.DIFFERENT,
        "sha256_a": digest_a,
        "sha256_b": digest_b,
        "note": "compared by sha256 from a manifest; compare run directories for tensor-level"
                " results",
    }
