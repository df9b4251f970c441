"""Which manifest versions this gate reads, and how an older one becomes the current shape.

Rule (docs/architecture.md, "Document versions"): a change of shape or meaning bumps
`schema_version` and adds a migration step here; an additive change (a new optional field, a new
enum value) bumps `schema_minor`, once per release, and needs none, since an older document is
valid as it is. Every earlier version is migrated in memory, one step at a time, to the current
one and then validated against the current schema; a newer one, minor included, is refused,
since fields this gate does not know could change what the document means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from repro_gate import validation
from repro_gate.errors import ErrorKind, GateError

Document = dict[str, Any]

# The version this gate writes: the schema's own `schema_version.const`, so the two never drift.
SCHEMA_VERSION: int = int(validation.load("manifest")["properties"]["schema_version"]["const"])
# The additive changes within it (new optional fields, new enum values): the schema's maximum.
SCHEMA_MINOR: int = int(validation.load("manifest")["properties"]["schema_minor"]["maximum"])

# Sections version 1 reserved as free-form objects (`{"type": "object"}`) that version 2 gave a
# schema: no version 1 gate ever wrote them, and content written under no schema has no meaning.
V1_RESERVED_SECTIONS = ("fingerprint", "checklist", "environment_diff", "reporting", "metrics")


def _from_v1(document: Document) -> Document:
    """Version 1 -> 2 (commit f1d55b9): the reserved sections got their schemas.

    Every other field kept its shape, so the version number changes and any reserved section a
    v1 document happens to hold is dropped: under v2 it would be read as something it never was.
    """
    upgraded = {key: value for key, value in document.items()
                if key not in V1_RESERVED_SECTIONS}
    upgraded["schema_version"] = 2
    return upgraded


V2_COST_REASON = "measured across separate processes by an earlier version"


def _from_v2(document: Document) -> Document:
    """Version 2 -> 3: the cost of determinism is measured in one process.

    A version 2 figure compared step times of separate processes, whose drift its interval could
    not see: it becomes `inconclusive` with that reason, keeping its point estimate and medians
    for the record, and dropping its interval (it did not mean 95%).
    """
    upgraded = {**document, "schema_version": 3}
    old = document.get("cost")
    if isinstance(old, dict):
        basis = old.get("basis")
        upgraded["cost"] = {
            "status": "inconclusive",
            "reason": V2_COST_REASON,
            "pct": old.get("pct"),
            "ci95_pct": None,
            "basis": "runs",
            "det_step_seconds": old.get("det_step_seconds"),
            "default_step_seconds": old.get("default_step_seconds"),
            "design": None,
            "max_width_pct": None,
            "note": f"migrated from schema version 2 ({basis or 'unknown'} basis)"
                    + (f": {old['note']}" if old.get("note") else ""),
        }
    return upgraded


def _from_v3(document: Document) -> Document:
    """Version 3 -> 4: seeding became the training's job, and the gate records who seeded.

    A version 3 gate seeded every deterministic run itself (with `random.seed`, default 0), and
    recorded nothing of the training's own seeding: `fingerprint.random.seeding` says so, with
    that seed as what the gate supplied. Nothing else changed shape.
    """
    upgraded = {**document, "schema_version": 4}
    fingerprint = document.get("fingerprint")
    if isinstance(fingerprint, dict) and isinstance(fingerprint.get("random"), dict):
        random = dict(fingerprint["random"])
        random.setdefault("seeding", _v3_seeding(random.get("seed")))
        upgraded["fingerprint"] = {**fingerprint, "random": random}
    return upgraded


V3_SEEDING_NOTE = ("recorded before schema version 4 by a gate that seeded every deterministic"
                   " run itself; what the training seeded was not recorded")


def _v3_seeding(seed: Any) -> Document:
    return {"gate_seed": seed if isinstance(seed, int) and seed >= 0 else None, "training": [],
            "first_parameter": None, "parameters_before_seeding": None, "unseeded": [],
            "settings": [], "note": V3_SEEDING_NOTE}


def _from_v4(document: Document) -> Document:
    """Version 4 -> 5: the gate compares run A with its golden trajectory, and runs the resume
    check when asked. A version 4 gate did neither: `comparison.golden` and `comparison.resume`
    are null.
    """
    upgraded = {**document, "schema_version": 5}
    comparison = document.get("comparison")
    if isinstance(comparison, dict):
        upgraded["comparison"] = {**comparison, "golden": comparison.get("golden"),
                                  "resume": comparison.get("resume")}
    return upgraded


# MIGRATIONS[n] turns a version n document into a version n + 1 one. Bumping SCHEMA_VERSION
# means adding the step from the previous version here.
MIGRATIONS: dict[int, Callable[[Document], Document]] = {
    1: _from_v1, 2: _from_v2, 3: _from_v3, 4: _from_v4}


def version_of(document: Document, source: str, kind: ErrorKind) -> int:
    """The document's `schema_version`, if this gate can read it; GateError otherwise.

    Not a positive integer: not a manifest (GateError(kind)). Newer than SCHEMA_VERSION:
    GateError(kind="manifest_version"), telling the user to upgrade.
    """
    version = document.get("schema_version")
    # bool is an int subclass in Python, but `true` is no version number.
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        found = "no schema_version" if version is None else f"schema_version {version!r}"
        raise GateError(f"{source}: not a repro-gate manifest ({found})", kind=kind)
    minor = document.get("schema_minor", 0)
    if version > SCHEMA_VERSION or (version == SCHEMA_VERSION and isinstance(minor, int)
                                     and minor > SCHEMA_MINOR):
        shown = f"{version}.{minor}" if version == SCHEMA_VERSION else str(version)
        raise GateError(
            f"{source}: schema_version {shown} is newer than this repro-gate understands"
            f" ({SCHEMA_VERSION}.{SCHEMA_MINOR}); upgrade repro-gate",
            kind=ErrorKind.MANIFEST_VERSION,
        )
    return version


def upgrade(document: Document, version: int) -> Document:
    """The document migrated from `version` to SCHEMA_VERSION (a new dict; the input is kept)."""
    for step in range(version, SCHEMA_VERSION):
        document = MIGRATIONS[step](document)
    return document
