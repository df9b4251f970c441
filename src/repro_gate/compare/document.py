"""The manifest's `comparison` section as typed records (`$defs` of manifest.schema.json)."""

from __future__ import annotations

from typing import Any, TypedDict

from repro_gate.compare.missing_state import MissingState
from repro_gate.compare.status import Status
from repro_gate.compare.trajectory import FirstDivergence


class _Artifact(TypedDict):
    path: str  # relative to the run's directory or working copy
    kind: str  # torch | safetensors | json | yaml | bytes
    status: Status


class ArtifactResult(_Artifact, total=False):
    """`artifact_comparison`: one artifact of the first run against the same path of another."""

    runs: list[str]
    note: str
    tolerance: dict[str, float]
    sha256_a: str
    sha256_b: str
    tensors: list[dict[str, Any]]  # `tensor_diff`, the unequal ones
    keys: list[dict[str, Any]]  # `key_diff`, the unequal ones
    ignored: list[dict[str, Any]]  # fields `compare.ignore` left out


class _Trajectory(TypedDict):
    steps_compared: int
    status: Status  # equal | different | not_recorded | length_differs


class TrajectorySummary(_Trajectory, total=False):
    steps: dict[str, int]  # per run, of the lowest rank that stepped
    ranks: int  # present only when more than one rank was compared


class ResumeDivergence(TypedDict):
    step: int
    rank: int
    cause: str  # the gate's usual cause (compare/cause.py)


class ResumeComparison(TypedDict):
    """`comparison.resume`: run R, stopped at a checkpoint and resumed, against run A."""

    status: str  # same | within_tolerance | changed | not_run
    resume_step: int | None
    checkpoint: str | None
    first_divergence: ResumeDivergence | None
    missing_state: MissingState | None
    note: str


class VaryDivergence(TypedDict):
    step: int
    cause: str | None  # the gate's usual cause (compare/cause.py)
    parameters: list[str]


class VaryArtifact(TypedDict):
    """An artifact of the varied run that differs from run A's: its tensors that differ, and
    its other values that differ by key path (`hparams.data_dir`)."""

    path: str
    status: str  # an artifact status (compare/status.py)
    tensors: list[str]
    keys: list[str]


class VaryResult(TypedDict):
    """`comparison.vary[]`: run V-<factor>, like run A but for one factor, against run A."""

    factor: str
    status: str  # same | changed | not_run | error (status.Vary)
    values: dict[str, str | int | None]  # the factor's setting in run A and in run V
    first_divergence: VaryDivergence | None
    artifacts: list[VaryArtifact]
    note: str


class _Comparison(TypedDict):
    basis: str  # bitwise | tolerance
    artifacts: list[ArtifactResult]
    trajectory: TrajectorySummary
    first_divergence: FirstDivergence | None


class Comparison(_Comparison, total=False):
    """`comparison`: the first run against every other one, run A against its golden
    trajectory (`golden`, set by the gate: None when it did not compare), the resume check
    (`resume`: None when `resume` is not configured) and the runs that vary one factor of the
    environment each (`vary`: present when `vary` is configured)."""

    golden: dict[str, Any] | None
    resume: ResumeComparison | None
    vary: list[VaryResult]
