"""Reading and writing `manifest.json`: every read migrates and validates, every write is atomic."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from repro_gate import parsing, validation
from repro_gate.credentials import credential_values, mask_document
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.manifest.versions import upgrade, version_of

MANIFEST_NAME = "manifest.json"
INVALID_MANIFEST_NAME = "manifest.invalid.json"


def read(path: Path) -> dict[str, Any]:
    """The manifest at `path` in the current shape (older versions migrated), validated.

    GateError kinds: manifest_missing, manifest_invalid, manifest_version (newer than ours).
    """
    document = load_object(path, noun="manifest", kind=ErrorKind.MANIFEST_INVALID,
                           missing_kind=ErrorKind.MANIFEST_MISSING)
    return current(document, str(path), kind=ErrorKind.MANIFEST_INVALID)


def write(document: dict[str, Any], output_dir: Path) -> Path:
    """Validate, then write `output_dir/manifest.json` atomically; an invalid one is kept aside
    as `manifest.invalid.json` for the bug report."""
    document = masked(document)
    try:
        validate(document)
    except GateError:
        write_json_atomic(output_dir / INVALID_MANIFEST_NAME, document)
        raise
    path = output_dir / MANIFEST_NAME
    write_json_atomic(path, document)
    return path


def update(path: Path, document: dict[str, Any]) -> None:
    """Replace the manifest at `path` with `document`, validated first; an invalid document
    raises GateError(kind="manifest_invalid") and leaves the file as it was."""
    document = masked(document)
    validate(document)
    write_json_atomic(path, document)


def masked(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with the credential values of this process replaced by `***`: a training
    that prints a secret, or a URL that carries one, does not put it in an uploaded file."""
    values = credential_values(os.environ)
    return mask_document(document, values) if values else document


def validate(document: dict[str, Any]) -> None:
    """Raise GateError(kind="manifest_invalid") naming the violations of the current schema."""
    problems = validation.errors("manifest", document)
    if problems:
        raise GateError(
            "manifest does not match its schema: " + _summary(problems, 5),
            kind=ErrorKind.MANIFEST_INVALID,
        )


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (see `write_text_atomic`)."""
    write_text_atomic(path, json.dumps(_finite(data), indent=2, allow_nan=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`.

    A crash at any point leaves either the old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            tmp.write(text)
        # mkstemp makes the file 0600: in the action's container that is root's alone, and the
        # runner's user could not upload it. A file as open() would make it:
        os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_object(path: Path, *, noun: str, kind: ErrorKind, missing_kind: ErrorKind | None = None
                ) -> dict[str, Any]:
    """The JSON object in the file at `path`; a one-line GateError(kind) for anything else.

    `noun` names what was expected in the "not found" message; `missing_kind` (default `kind`)
    is the kind of that error.
    """
    try:
        document = parsing.load_json(parsing.read_text(Path(path)))
    except FileNotFoundError:
        raise GateError(f"{path}: {noun} not found", kind=missing_kind or kind) from None
    except (OSError, UnicodeDecodeError) as error:
        raise GateError(f"{path}: cannot read: {one_line(error)}", kind=kind) from None
    except parsing.OverBudget as error:
        raise GateError(f"{path}: not read: {error}", kind=kind) from None
    except json.JSONDecodeError as error:
        raise GateError(f"{path}: not valid JSON (line {error.lineno}): {error.msg}",
                        kind=kind) from None
    if not isinstance(document, dict):
        raise GateError(f"{path}: not a JSON object", kind=kind)
    return document


def current(document: dict[str, Any], source: str, *, kind: ErrorKind) -> dict[str, Any]:
    """A manifest read from `source`, migrated to the current version and validated.

    Too new: GateError(kind="manifest_version"); anything else wrong: GateError(kind).
    """
    upgraded = upgrade(document, version_of(document, source, kind))
    problems = validation.errors("manifest", upgraded)
    if problems:
        raise GateError(f"{source}: not a valid manifest: {_summary(problems, 1)}", kind=kind)
    return upgraded


def _summary(problems: list[str], named: int) -> str:
    """The first `named` violations, and how many more there are: one line however many."""
    more = len(problems) - named
    return "; ".join(problems[:named]) + (f" (and {more} more)" if more > 0 else "")


def _finite(value: Any) -> Any:
    # JSON has no NaN or infinity; a non-finite difference is recorded as null.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
