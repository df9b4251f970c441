"""A run's candidate golden file in the output directory (`golden/<class>.json`): what
`repro-gate bless` would write for it, so CI can upload it with the manifest and a pull request
can carry it without a second run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate import notices
from repro_gate.errors import GateError, one_line
from repro_gate.golden import document

SUBDIR = "golden"  # in the output directory


def path_of(output_dir: Path, machine_class: str) -> Path:
    return output_dir / SUBDIR / f"{machine_class}.json"


def remove_stale(output_dir: Path, machine_class: str) -> None:
    """An earlier gate's candidate for this class: a gate with nothing new to bless leaves none,
    so an uploaded output directory never offers old numbers."""
    path_of(output_dir, machine_class).unlink(missing_ok=True)


def write_candidate(golden: dict[str, Any], output_dir: Path) -> Path | None:
    """Write the candidate (a run made into a golden document) and return its path; a failure
    to write it is a warning (None)."""
    path = path_of(output_dir, golden["machine_class"])
    try:
        document.write(golden, path)
    except (GateError, OSError, ValueError) as error:
        notices.warning(f"the candidate golden file was not written: {one_line(error)}")
        return None
    return path
