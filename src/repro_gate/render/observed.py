"""What a verdict rests on, in words: the same in the reasons, the console and on GitHub.

The manifest's `evidence` says whether the probe loaded in every compared run and whether it saw
an optimizer step. Without steps the verdict comes from the artifacts alone, and without the
probe no determinism was applied either; the reports say so next to the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARTIFACTS_ONLY = "from artifacts only: no steps observed"
NOT_APPLIED = "determinism not applied"


def limitation(evidence: Any) -> str:
    """The words that qualify a verdict, or "" when the runs were observed step by step."""
    if not isinstance(evidence, Mapping):
        return ""  # older manifests and errors: nothing recorded, nothing to qualify
    if evidence.get("probe_loaded") is False:
        return f"{ARTIFACTS_ONLY}, {NOT_APPLIED}"
    if evidence.get("steps_observed") is False:
        return ARTIFACTS_ONLY
    return ""


def of_manifest(manifest: Mapping[str, Any]) -> str:
    """`limitation` of a manifest's pass or fail; "" for an error."""
    if manifest.get("verdict") not in ("pass", "fail"):
        return ""
    return limitation(manifest.get("evidence"))
