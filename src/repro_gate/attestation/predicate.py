"""The predicate of the reproducibility attestation: what a gate that reached a verdict compared
and saw, taken from its manifest (docs/attestation.md; `schemas/reproducibility-predicate`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

# The predicate's type: one URI, versioned; a change of the predicate's meaning is a new version.
PREDICATE_TYPE = "https://repro-gate.dev/attestation/reproducibility/v1"
SCHEMA_NAME = "reproducibility-predicate"  # schemas/reproducibility-predicate.schema.json
# A run launched on the host: its training could have written the gate's records (docs/security.md).
LOCAL = "local"

JsonObject = dict[str, Any]  # a section copied from the manifest as it is there


class Gate(TypedDict):
    name: str
    version: str  # the repro-gate that ran the gate


class Reason(TypedDict):
    code: str
    message: str


class ComparedArtifact(TypedDict):
    path: str  # relative to the working directory
    status: str  # equal, within_tolerance, different, missing_in_a, ...


class Compared(TypedDict):
    basis: str  # bitwise or tolerance
    tolerance: JsonObject | None  # {atol, rtol, ...}; None when bitwise
    steps: int | None  # optimizer steps compared; None when no trajectory was compared
    trajectory: str | None  # the trajectories' status
    artifacts: list[ComparedArtifact]


class Code(TypedDict):
    commit: str | None
    dirty: bool | None


class Lockfile(TypedDict):
    path: str
    sha256: str


class Environment(TypedDict):
    image: str | None  # the training image's reference; None for a local run
    image_digest: str | None  # sha256:... of the image (its repository digest, else its ID)
    lockfiles: list[Lockfile]
    python: str | None
    torch: str | None
    cuda: str | None
    cudnn: str | None
    driver: str | None
    gpu_model: str | None


class Golden(TypedDict):
    status: str
    machine_class: str
    path: str


class Resume(TypedDict):
    status: str
    resume_step: int | None


class Predicate(TypedDict):
    gate: Gate
    verdict: str
    reasons: list[Reason]
    compared: Compared
    launcher: str  # local or docker
    code: Code
    config_hash: str | None
    environment: Environment
    golden: Golden | None
    resume: Resume | None
    vary: list[JsonObject] | None  # one entry per factor, as in the manifest
    started_at: str
    finished_at: str


def build(manifest: Mapping[str, Any]) -> Predicate:
    """The predicate of a gate's manifest (its verdict pass or fail)."""
    comparison = manifest.get("comparison") or {}
    fingerprint = manifest.get("fingerprint") or {}
    return {
        "gate": {"name": str(manifest["gate"]), "version": str(manifest["tool"]["version"])},
        "verdict": str(manifest["verdict"]),
        "reasons": [{"code": str(reason["code"]), "message": str(reason["message"])}
                    for reason in manifest.get("reasons") or []],
        "compared": compared(comparison, manifest.get("config") or {}),
        "launcher": launcher(manifest),
        "code": code(fingerprint.get("code") or {}),
        "config_hash": manifest.get("config_hash"),
        "environment": environment(fingerprint),
        "golden": golden(comparison.get("golden")),
        "resume": resume(comparison.get("resume")),
        "vary": comparison.get("vary"),
        "started_at": str(manifest["started_at"]),
        "finished_at": str(manifest["finished_at"]),
    }


def compared(comparison: Mapping[str, Any], config: Mapping[str, Any]) -> Compared:
    """The comparison's basis, tolerance, steps and artifacts."""
    basis = str(comparison.get("basis", "bitwise"))
    tolerance = config.get("tolerance")
    trajectory = comparison.get("trajectory") or {}
    return {
        "basis": basis,
        "tolerance": tolerance if basis != "bitwise" and isinstance(tolerance, dict) else None,
        "steps": trajectory.get("steps_compared"),
        "trajectory": trajectory.get("status"),
        "artifacts": [{"path": str(entry["path"]), "status": str(entry["status"])}
                      for entry in comparison.get("artifacts") or []],
    }


def first_run(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Run A: the first deterministic run that is neither the localisation nor another extra run."""
    for run in manifest.get("runs") or []:
        if run.get("mode") == "deterministic" and "purpose" not in run:
            return dict(run)
    return None


def launcher(manifest: Mapping[str, Any]) -> str:
    """Run A's launcher: `local` or `docker` (a manifest from before the field: local)."""
    run = first_run(manifest) or {}
    return str(run.get("launcher") or LOCAL)


def code(section: Mapping[str, Any]) -> Code:
    return {"commit": section.get("commit"), "dirty": section.get("dirty")}


def environment(fingerprint: Mapping[str, Any]) -> Environment:
    """The facts of the environment that decide the numbers."""
    env = fingerprint.get("env") or {}
    hardware = fingerprint.get("hardware") or {}
    image = env.get("image") or {}
    gpus = hardware.get("gpus") or []
    return {
        "image": image.get("reference"),
        "image_digest": image_digest(image),
        "lockfiles": [{"path": str(lock["path"]), "sha256": str(lock["sha256"])}
                      for lock in env.get("lockfiles") or []],
        "python": text(env.get("python")),
        "torch": text(env.get("torch")),
        "cuda": text(env.get("cuda_build")),
        "cudnn": text(env.get("cudnn")),
        "driver": text(hardware.get("driver_version")),
        "gpu_model": text(gpus[0].get("name")) if gpus else None,
    }


def text(value: object) -> str | None:
    """A fact as text (cuDNN's version may be recorded as a number); None when unknown."""
    return None if value is None else str(value)


def image_digest(image: Mapping[str, Any]) -> str | None:
    """`sha256:...` of the training image: its repository digest, else its local ID."""
    for reference in image.get("repo_digests") or []:
        return str(reference).rpartition("@")[2]
    identity = image.get("id")
    return str(identity) if identity else None


def golden(section: Mapping[str, Any] | None) -> Golden | None:
    if not section:
        return None
    return {"status": str(section["status"]), "machine_class": str(section["machine_class"]),
            "path": str(section["path"])}


def resume(section: Mapping[str, Any] | None) -> Resume | None:
    if not section:
        return None
    return {"status": str(section["status"]), "resume_step": section.get("resume_step")}
