"""Read a manifest or fingerprint file given on the command line or as the baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.errors import GateError
from repro_gate.fingerprint.diff import fingerprint_of


def read_document(path: Path, kind: str) -> dict[str, Any]:
    """A manifest or fingerprint document holding a fingerprint; GateError(kind) otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GateError(f"{path}: file not found", kind=kind) from None
    except (OSError, UnicodeDecodeError) as error:
        raise GateError(f"{path}: cannot read: {error}", kind=kind) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise GateError(f"{path}: not valid JSON (line {error.lineno}): {error.msg}",
                        kind=kind) from None
    try:
        fingerprint_of(document)
    except ValueError as error:
        raise GateError(f"{path}: {error}", kind=kind) from None
    return document
