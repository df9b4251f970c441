"""Reading and writing `upgrade.json` (`schemas/upgrade.schema.json`), the report of
`repro-gate upgrade`: masked like a manifest, validated before it is written, written atomically.

The document is built by the upgrade check (upgrade/record.py); this module only guards
what reaches the disk and what is read back from it. Its shape has its own version
(`UPGRADE_SCHEMA_VERSION`), independent of the manifest's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate import validation
from repro_gate.errors import ErrorKind, GateError, StrEnum
from repro_gate.manifest.store import load_object, masked, write_json_atomic

UPGRADE_FILE = "upgrade.json"
INVALID_UPGRADE_FILE = "upgrade.invalid.json"
UPGRADE_SCHEMA_VERSION = 1
SCHEMA = "upgrade"


class UpgradeVerdict(StrEnum):
    """`verdict` of upgrade.json."""

    SAME = "same"  # the numerics are kept (bit for bit or within the tolerance)
    CHANGED = "changed"
    NOT_REPRODUCIBLE = "not_reproducible"  # the training does not reproduce in the candidate
    ERROR = "error"


# The gate's verdict an upgrade verdict reads as: the action's `verdict` output, the check run's
# conclusion, the icon.
GATE_VERDICTS: dict[str, str] = {
    UpgradeVerdict.SAME: "pass", UpgradeVerdict.CHANGED: "fail",
    UpgradeVerdict.NOT_REPRODUCIBLE: "fail", UpgradeVerdict.ERROR: "error",
}


def write_upgrade(record: Mapping[str, Any], output_dir: Path) -> Path:
    """Mask, validate, then write `output_dir/upgrade.json` atomically and return its path.

    An invalid document raises GateError(kind="manifest_invalid") and is kept aside as
    `upgrade.invalid.json` for the bug report; an earlier `upgrade.json` is left as it was.
    """
    document = masked(dict(record))
    try:
        validate_upgrade(document)
    except GateError:
        write_json_atomic(Path(output_dir) / INVALID_UPGRADE_FILE, document)
        raise
    path = Path(output_dir) / UPGRADE_FILE
    write_json_atomic(path, document)
    return path


def read_upgrade(path: Path) -> dict[str, Any]:
    """The upgrade report at `path`, validated.

    GateError kinds: manifest_missing, manifest_version (written by a newer repro-gate),
    manifest_invalid (anything else wrong).
    """
    document = load_object(Path(path), noun="upgrade report", kind=ErrorKind.MANIFEST_INVALID,
                           missing_kind=ErrorKind.MANIFEST_MISSING)
    version = document.get("schema_version")
    # A newer shape is refused by name rather than reported as a list of schema violations.
    if isinstance(version, int) and not isinstance(version, bool) and (
            version > UPGRADE_SCHEMA_VERSION):
        raise GateError(f"{path}: upgrade report version {version} is newer than this repro-gate"
                        f" reads ({UPGRADE_SCHEMA_VERSION}): upgrade repro-gate",
                        kind=ErrorKind.MANIFEST_VERSION)
    validate_upgrade(document, source=str(path))
    return document


def validate_upgrade(document: dict[str, Any], source: str = UPGRADE_FILE) -> None:
    """Raise GateError(kind="manifest_invalid"), one line naming the first violation of the
    schema and how many more there are."""
    problems = validation.errors(SCHEMA, document)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        first = " ".join(problems[0].split())  # a key from outside may hold a line break
        raise GateError(f"{source}: does not match the upgrade report's schema: {first}{more}",
                        kind=ErrorKind.MANIFEST_INVALID)
