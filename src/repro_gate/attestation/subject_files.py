"""Where run A's file of each subject lies under the output directory, for `actions/attest`'s
`subject-path` (which names a subject by its file and digests it again)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate.attestation.predicate import first_run
from repro_gate.attestation.statement import Statement
from repro_gate.compare.files import sha256_file

# A run's working copy in its run directory (the gate's `workcopy.WORK_SUBDIR`, a floor above):
# the files the run wrote into its working directory, by their path relative to it.
WORK_SUBDIR = "work"


def subject_files(statement: Statement, manifest: Mapping[str, Any]) -> list[Path]:
    """Run A's file of each subject, in the subjects' order.

    A file is looked for as the gate collected it: in run A's run directory first, then in its
    working copy. One that is gone, or whose digest is no longer the subject's, is left out:
    `actions/attest` would sign its new digest.
    """
    run = first_run(manifest) or {}
    run_dir = Path(str(run.get("run_dir", "")))
    found = []
    for subject in statement["subject"]:
        for candidate in (run_dir / subject["name"], run_dir / WORK_SUBDIR / subject["name"]):
            if candidate.is_file() and sha256_file(candidate) == subject["digest"]["sha256"]:
                found.append(candidate)
                break
    return found
