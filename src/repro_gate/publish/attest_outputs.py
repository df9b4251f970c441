"""The action's outputs for `actions/attest` when the input `attest` is true: the gate's
predicate, its type and the subjects' files, which that action signs with the workflow's
identity (docs/attestation.md#keyless-in-github-actions)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate.attestation import statement
from repro_gate.attestation.predicate import PREDICATE_TYPE
from repro_gate.attestation.subject_files import subject_files
from repro_gate.config import overrides
from repro_gate.workspace import repository_path, workspace_root

INPUT = "attest"
OUTPUTS = ("subject-path", "predicate-type", "predicate-path")


def requested(environ: Mapping[str, str]) -> bool:
    """The input `attest` (`true` or `false`, default false); a ConfigError for anything else."""
    return overrides.parse_boolean(f"input {INPUT}", overrides.action_input(environ, INPUT)
                                   or "false")


def outputs_for(manifest: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """`subject-path` (run A's files, one per line), `predicate-type` and `predicate-path`;
    empty when the gate wrote no statement (an error) and none at all unless requested."""
    if not requested(environ):
        return {}
    output_dir = Path(str(manifest.get("output_dir", "")))
    made = statement.build(manifest)
    predicate = output_dir / statement.PREDICATE_NAME
    if made is None or not predicate.is_file():
        return dict.fromkeys(OUTPUTS, "")
    workspace = workspace_root(environ)
    files = subject_files(made, manifest)
    return {
        "subject-path": "\n".join(_shown(path, workspace) for path in files),
        "predicate-type": PREDICATE_TYPE,
        "predicate-path": _shown(predicate, workspace),
    }


def _shown(path: Path, workspace: Path) -> str:
    """Relative to the workspace, where the next step runs, when the file is inside it."""
    return repository_path(str(path.absolute()), workspace) or str(path)
