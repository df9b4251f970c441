"""Manifest documents for the tests: a real-shaped current one (version 5), and the versions 4,
3, 2 and 1 it came from."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from helpers.paths import FIXTURES, MANIFEST_FAIL

# The same failing run as a version 3 gate wrote it (it seeded every run, recorded no seeding).
MANIFEST_V3 = FIXTURES / "manifest" / "manifest-v3.json"

# Sections version 1 only reserved (free-form objects); no version 1 gate wrote them.
V1_UNWRITTEN = ("fingerprint", "checklist", "environment_diff", "reporting", "metrics")


def load_current() -> dict[str, Any]:
    """A failing run's manifest, valid against the current schema (version 5)."""
    return copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))


def as_v4(document: dict[str, Any]) -> dict[str, Any]:
    """What a version 4 gate wrote for the same run: no golden trajectory, no resume check."""
    old = copy.deepcopy(document)
    old["schema_version"] = 4
    if isinstance(old.get("comparison"), dict):
        old["comparison"].pop("resume", None)
        old["comparison"].pop("golden", None)
    return old


def as_v3(document: dict[str, Any]) -> dict[str, Any]:
    """What a version 3 gate wrote for the same run: no record of who seeded."""
    old = as_v4(document)
    old["schema_version"] = 3
    random = (old.get("fingerprint") or {}).get("random")
    if isinstance(random, dict):
        random.pop("seeding", None)
    return old


def as_v2(document: dict[str, Any]) -> dict[str, Any]:
    """What a version 2 gate wrote for the same run: its cost compared separate processes."""
    old = as_v3(document)
    old["schema_version"] = 2
    cost = old.get("cost")
    if cost is not None:
        old["cost"] = {"pct": cost["pct"], "basis": "step_median",
                       "det_step_seconds": cost["det_step_seconds"],
                       "default_step_seconds": cost["default_step_seconds"],
                       "det_wall_seconds": 152.4, "default_wall_seconds": 141.9,
                       "warmup_steps": 5, "steps_timed": 35, "ci95_pct": [-6.7, 9.6]}
    return old


def as_v1(document: dict[str, Any]) -> dict[str, Any]:
    """The inverse of the 1 -> 2 migration: what a version 1 gate wrote for the same run."""
    old = {key: value for key, value in as_v2(document).items() if key not in V1_UNWRITTEN}
    old["schema_version"] = 1
    return old


def write_json(path: Path, document: Any) -> Path:
    """`document` as JSON at `path`; returns `path`."""
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path
