"""Manifests around a given cost section, with the verdict and reasons the gate itself writes.

Each starts from a failing gate's manifest (tests/fixtures/github/manifest-fail.json), made
reproducible when asked; `verdict.failures` / `verdict.successes` and then
`verdict.with_budget` decide, as `gate.record.assemble` does, and the document is valid against
the manifest schema before anything is rendered from it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.paths import MANIFEST_FAIL
from repro_gate import validation
from repro_gate.gate import verdict

FIXTURE = MANIFEST_FAIL
SCHEMA_VERSION = validation.load("manifest")["properties"]["schema_version"]["const"]
NOTE = ("CUBLAS_WORKSPACE_CONFIG is set for the whole cost run: both arms pay for it, so the"
        " figure leaves it out")


def cost(
    pct: float | None,
    interval: list[float] | None,
    *,
    status: str = "measured",
    pairs: int = 6,
    **extra: Any,
) -> dict[str, Any]:
    """A cost section of the block design (schema version 3)."""
    section: dict[str, Any] = {
        "status": status,
        "pct": pct,
        "ci95_pct": interval,
        "basis": "blocks",
        "det_step_seconds": 0.0412,
        "default_step_seconds": 0.0400,
        "design": {"arms": ["deterministic", "default"], "block_steps": 4, "blocks": pairs,
                   "pairs": pairs, "warmup_steps": 3},
        "max_width_pct": 20.0,
        "note": NOTE,
    }
    section.update(extra)
    return section


def gate_manifest(cost_section: dict[str, Any] | None, *, reproducible: bool) -> dict[str, Any]:
    """A gate's manifest with this cost, judged by the gate's own verdict functions."""
    document = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    document["schema_version"] = SCHEMA_VERSION
    document["runs"][2].update(name="cost", mode="cost")  # schema 3: the cost run, not default
    comparison = document["comparison"]
    if reproducible:
        document["nondeterministic_ops"] = []
        comparison["first_divergence"] = None
        comparison["trajectory"]["status"] = "equal"
        for artifact in comparison["artifacts"]:
            artifact["status"] = "equal"
            artifact.pop("tensors", None)
            artifact.pop("keys", None)
    failures = verdict.failures(comparison, [])
    outcome = verdict.FAIL if failures else verdict.PASS
    reasons = failures or verdict.successes(comparison, 2)
    outcome, reasons = verdict.with_budget(outcome, reasons, cost_section)
    document.update(verdict=outcome, reasons=reasons, cost=cost_section)
    problems = validation.errors("manifest", document)
    assert problems == [], problems
    return document
