"""The run manifest: validated against `schemas/manifest.schema.json`, written atomically."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from repro_gate import validation
from repro_gate.errors import GateError

MANIFEST_NAME = "manifest.json"
INVALID_MANIFEST_NAME = "manifest.invalid.json"


def schema_version() -> int:
    """The manifest schema version this gate writes."""
    return int(validation.load("manifest")["properties"]["schema_version"]["const"])


def validate(manifest: dict[str, Any]) -> None:
    """Raise GateError(kind="manifest_invalid") naming each violation."""
    problems = validation.errors("manifest", manifest)
    if problems:
        raise GateError(
            "manifest does not match its schema: " + "; ".join(problems[:5])
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""),
            kind="manifest_invalid",
        )


def write(manifest: dict[str, Any], output_dir: Path) -> Path:
    """Validate, then write `manifest.json` atomically; an invalid one is kept aside."""
    try:
        validate(manifest)
    except GateError:
        write_json_atomic(output_dir / INVALID_MANIFEST_NAME, manifest)
        raise
    path = output_dir / MANIFEST_NAME
    write_json_atomic(path, manifest)
    return path


def read(path: Path) -> dict[str, Any]:
    """Load and validate a manifest written earlier; one-line errors for every problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateError(f"manifest {path} not found", kind="manifest_missing") from None
    except (OSError, UnicodeDecodeError) as error:
        raise GateError(f"cannot read manifest {path}: {error}", kind="manifest_invalid") from None
    except json.JSONDecodeError as error:
        raise GateError(f"{path}: not valid JSON: {error}", kind="manifest_invalid") from None
    if not isinstance(data, dict):
        raise GateError(f"{path}: not a repro-gate manifest", kind="manifest_invalid")
    problems = validation.errors("manifest", data)
    if problems:
        raise GateError(f"{path}: not a valid manifest: {problems[0]}", kind="manifest_invalid")
    return data


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            json.dump(_finite(data), tmp, indent=2, allow_nan=False)
            tmp.write("\n")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _finite(value: Any) -> Any:
    # JSON has no NaN or infinity; a non-finite difference is recorded as null.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
