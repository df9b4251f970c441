"""What the gate supplied, in words shared by every report: "seeded by the gate (seed N)" when
`seed` was set, and the closing "to reproduce outside the gate" lines (the settings the gate
applied that the training lacks, from `fingerprint.random.seeding`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.fingerprint.seeding import reproduce_lines

REPRODUCE_HEADING = "to reproduce outside the gate"
NOTHING_TO_ADD = "nothing to add: the training sets every setting the gate applies"


def gate_seed_note(manifest: Mapping[str, Any]) -> str:
    """`seeded by the gate (seed 3)`, or empty when the gate seeded nothing."""
    config = manifest.get("config")
    seed = config.get("seed") if isinstance(config, Mapping) else None
    if not isinstance(seed, int) or isinstance(seed, bool):
        return ""
    return f"seeded by the gate (seed {seed})"


def reproduce(manifest: Mapping[str, Any]) -> list[str] | None:
    """The environment lines and Python calls the training lacks; None when the manifest does
    not record the seeding (an error before the runs, an older manifest)."""
    fingerprint = manifest.get("fingerprint")
    random = fingerprint.get("random") if isinstance(fingerprint, Mapping) else None
    record = random.get("seeding") if isinstance(random, Mapping) else None
    if not isinstance(record, Mapping) or not record.get("settings"):
        return None
    return reproduce_lines(dict(record))
