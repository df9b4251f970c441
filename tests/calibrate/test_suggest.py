"""The suggested tolerance: at least twice the largest difference, two significant digits, and
printed so that YAML reads every value back as the same number."""

from __future__ import annotations

import yaml

from repro_gate.calibrate.spread import StepSpread
from repro_gate.calibrate.suggest import Bounds, Suggestion, round_up, suggest


def test_the_suggestion_is_twice_the_largest_difference_rounded_up() -> None:
    loss: list[StepSpread] = [
        {"step": 1, "min": 1.0, "max": 1.0, "max_abs_difference": 0.0, "max_rel_difference": 0.0},
        {"step": 2, "min": 0.5, "max": 0.5000001, "max_abs_difference": 1.23e-7,
         "max_rel_difference": 2.46e-7},
    ]
    suggestion = suggest(loss, [])
    assert (suggestion.loss.atol, suggestion.loss.rtol) == (2.5e-7, 5e-7)
    assert (suggestion.tensors.atol, suggestion.tensors.rtol) == (0.0, 0.0)


def test_every_value_reads_back_from_the_yaml_and_none_seen_stays_0() -> None:
    for value in (1e-7, 2.0, 99.9, 5e-324, 1e16, 0.000123):
        rounded = round_up(value)
        assert value <= rounded <= 1.1 * value or value < 1e-300
        text = Suggestion(Bounds(rounded, rounded), Bounds(0.0, rounded)).yaml()
        tolerance = yaml.safe_load(text)["golden"]["tolerance"]
        assert tolerance["loss"] == {"rtol": rounded, "atol": rounded, "steps_outside": 0}
        assert tolerance["tensors"] == {"rtol": 0, "atol": rounded}
        assert isinstance(tolerance["loss"]["rtol"], float)
    assert round_up(0.0) == 0.0
