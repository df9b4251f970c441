"""The words that qualify a verdict by what it rests on: steps observed, or artifacts only."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.render.observed import ARTIFACTS_ONLY, NOT_APPLIED, limitation, of_manifest


def test_a_run_observed_step_by_step_needs_no_qualifier() -> None:
    assert limitation({"probe_loaded": True, "steps_observed": True}) == ""


def test_no_steps_observed_means_the_verdict_comes_from_artifacts_only() -> None:
    assert limitation({"probe_loaded": True, "steps_observed": False}) == ARTIFACTS_ONLY


def test_without_the_probe_no_determinism_was_applied_either() -> None:
    words = limitation({"probe_loaded": False, "steps_observed": False})
    assert words == f"{ARTIFACTS_ONLY}, {NOT_APPLIED}"
    assert words.startswith("from artifacts only")
    assert words.endswith("determinism not applied")


@pytest.mark.parametrize("evidence", [None, "probe loaded", ["steps"], 3])
def test_an_older_manifest_without_evidence_is_not_qualified(evidence: Any) -> None:
    assert limitation(evidence) == ""


@pytest.mark.parametrize("verdict", ["pass", "fail"])
def test_a_pass_or_fail_is_qualified_by_its_evidence(verdict: str) -> None:
    manifest = {"verdict": verdict, "evidence": {"probe_loaded": True, "steps_observed": False}}
    assert of_manifest(manifest) == ARTIFACTS_ONLY


def test_an_error_is_never_qualified() -> None:
    manifest = {"verdict": "error", "evidence": {"probe_loaded": False, "steps_observed": False}}
    assert of_manifest(manifest) == ""
