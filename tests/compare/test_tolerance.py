"""Choosing the tolerance for an artifact from the config's `tolerance` value."""

from __future__ import annotations

import pytest

from repro_gate.compare import Tolerance, tolerance_for
from repro_gate.config import ToleranceConfig

CONFIG = ToleranceConfig.from_document({
    "atol": 1e-6,
    "rtol": 1e-5,
    "per_artifact": [
        {"glob": "metrics/*.json", "atol": 1e-3},
        {"glob": "*.safetensors", "rtol": 0.0},
        {"glob": "*.json", "atol": 0.5, "rtol": 0.5},
    ],
})


@pytest.mark.parametrize("config", [None, "bitwise"])
def test_bitwise_means_no_tolerance(config: str | None) -> None:
    assert tolerance_for(ToleranceConfig.from_document(config), "model.pt") is None


def test_top_level_values_apply_when_no_glob_matches() -> None:
    assert tolerance_for(CONFIG, "ckpt/model.pt") == Tolerance(atol=1e-6, rtol=1e-5)
    assert tolerance_for(ToleranceConfig.from_document({}), "model.pt") == Tolerance()


def test_first_matching_glob_wins_and_inherits_missing_values() -> None:
    assert tolerance_for(CONFIG, "metrics/eval.json") == Tolerance(atol=1e-3, rtol=1e-5)
    assert tolerance_for(CONFIG, "summary.json") == Tolerance(atol=0.5, rtol=0.5)


def test_glob_also_matches_the_basename() -> None:
    assert tolerance_for(CONFIG, "ckpt/step_10/model.safetensors") == Tolerance(1e-6, 0.0)


def test_windows_separators_are_treated_as_posix() -> None:
    assert tolerance_for(CONFIG, "metrics\\eval.json") == Tolerance(atol=1e-3, rtol=1e-5)


def test_allows_uses_run_b_as_the_reference() -> None:
    tolerance = Tolerance(atol=0.0, rtol=0.5)
    assert tolerance.allows(1.0, 1.8)
    assert not tolerance.allows(1.8, 1.0)
    assert not tolerance.allows(1.0, 0.0)
    assert tolerance.allows(float("nan"), float("nan"))
    assert not tolerance.allows(float("nan"), 1.0)
