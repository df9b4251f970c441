"""Reading the document `diff` and `check --baseline` take: a manifest or a fingerprint.

A manifest goes through the same version check, migration and validation as every manifest
read; a `repro-gate fingerprint --json` document (or a bare fingerprint) is taken as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.errors import ErrorKind, GateError
from repro_gate.manifest.store import current, load_object
from repro_gate.manifest.versions import upgrade, version_of

# The top-level keys of a bare fingerprint (the `fingerprint` section on its own).
BARE_FINGERPRINT_KEYS = ("code", "env", "hardware")


def read_document(path: Path, kind: ErrorKind) -> dict[str, Any]:
    """The manifest or fingerprint document at `path`, holding a fingerprint.

    Every problem is a one-line GateError(kind), except a manifest newer than this gate:
    GateError(kind="manifest_version").
    """
    document = load_object(path, noun="file", kind=kind)
    if "schema_version" in document:
        return _manifest(document, str(path), kind)
    if isinstance(document.get("fingerprint"), dict):
        return document  # `repro-gate fingerprint --json`
    if "fingerprint" in document:
        raise GateError(f"{path}: its 'fingerprint' is not an object", kind=kind)
    if all(key in document for key in BARE_FINGERPRINT_KEYS):
        return document
    raise GateError(f"{path}: neither a repro-gate manifest nor a fingerprint", kind=kind)


def _manifest(document: dict[str, Any], source: str, kind: ErrorKind) -> dict[str, Any]:
    version = version_of(document, source, kind)
    upgraded = upgrade(document, version)
    # Checked before the schema: the one thing a diff needs, and no v1 manifest has it.
    if "fingerprint" not in upgraded:
        raise GateError(f"{source}: manifest (schema_version {version}) has no fingerprint",
                        kind=kind)
    return current(upgraded, source, kind=kind)
