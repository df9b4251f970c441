"""`repro-gate bless`: the golden file of a passing gate's machine class, from its manifest.

A manifest whose runs did not reproduce is refused: only a failure of the numerics against the
golden trajectory (or of the cost budget) leaves the runs worth blessing. So is one whose steps
were not observed (a verdict from the artifacts alone): a golden trajectory is run A's steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate import manifest
from repro_gate.config import Config
from repro_gate.errors import EXIT_NOT_BLESSABLE, ErrorKind, GateError
from repro_gate.golden import document, select
from repro_gate.golden.check import now
from repro_gate.probe import read_trajectory

# Reasons of a failed gate whose runs still reproduced each other (and what they showed).
BLESSABLE_FAILURES = {"numerics_changed", "cost_over_budget", "bitwise_equal", "within_tolerance"}
# Where a run's working copy is, inside its run directory (the gate's `workcopy.WORK_SUBDIR`,
# a floor above): artifacts found there keep their path relative to it.
WORK_SUBDIR = "work"


class NotBlessable(GateError):
    """The manifest's runs did not reproduce: nothing to bless (its own exit code)."""

    exit_code = EXIT_NOT_BLESSABLE

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.GOLDEN)


@dataclass(frozen=True)
class Blessed:
    path: Path  # the golden file written
    document: dict[str, Any]
    updated: bool  # an earlier version was replaced


def bless(config: Config, manifest_path: Path) -> Blessed:
    """Write the golden file of the manifest's machine class (the file `golden` names, or
    `<class>.json` in its folder)."""
    record = manifest.read(manifest_path)
    refusal = not_blessable(record)
    if refusal:
        raise NotBlessable(f"{manifest_path}: {refusal}; nothing blessed")
    golden = document.build(run_data(record), now())
    path = select.choose(config, golden["machine_class"]).path
    updated = path.is_file()
    document.write(golden, path)
    return Blessed(path, golden, updated)


def not_blessable(record: dict[str, Any]) -> str | None:
    """Why a manifest cannot be blessed; None when it can."""
    codes = {reason["code"] for reason in record["reasons"]}
    if record["verdict"] == "pass" or (record["verdict"] == "fail"
                                       and codes <= BLESSABLE_FAILURES):
        if not record.get("runs") or "fingerprint" not in record:
            return "its gate recorded no run to bless"
        if not _steps_observed(record):
            return ("no optimizer step of its runs was observed (a verdict from the artifacts"
                    " alone), and a golden trajectory is run A's steps")
        return None
    return f"its runs did not reproduce (verdict {record['verdict']}: {', '.join(sorted(codes))})"


def _steps_observed(record: dict[str, Any]) -> bool:
    """Whether the probe recorded run A's steps (older manifests have no `evidence`)."""
    evidence = record.get("evidence") or {}
    return evidence.get("steps_observed") is not False and record["runs"][0].get("steps") != 0


def run_data(record: dict[str, Any]) -> document.RunData:
    """Run A of a manifest, read back from its run directory."""
    run = record["runs"][0]
    run_dir = Path(run["run_dir"])
    trajectory = read_trajectory(run_dir)
    artifacts = [(entry["path"], _artifact_file(run_dir, entry["path"]))
                 for entry in run.get("artifacts") or []]
    return document.RunData(trajectory, record["fingerprint"], artifacts, record["gate"])


def _artifact_file(run_dir: Path, rel_path: str) -> Path:
    for candidate in (run_dir / rel_path, run_dir / WORK_SUBDIR / rel_path):
        if candidate.is_file():
            return candidate
    raise GateError(f"artifact {rel_path} of run A is no longer in {run_dir}: run the gate again,"
                    " then bless", kind=ErrorKind.GOLDEN)
