"""The calibration's checks and its document: fewer than two samples refused, and
calibration.json validated against its schema before it is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro_gate import __version__
from repro_gate.calibrate.runs import (
    CALIBRATION_NAME,
    MIN_SAMPLES,
    SCHEMA_VERSION,
    check_samples,
    write,
)
from repro_gate.calibrate.spread import loss_spread
from repro_gate.calibrate.suggest import MARGIN, suggest
from repro_gate.errors import ErrorKind, GateError


def document() -> dict[str, Any]:
    trajectories = [[{"step": 1, "loss": (1.0).hex()}, {"step": 2, "loss": (0.5).hex()}],
                    [{"step": 1, "loss": (1.0).hex()}, {"step": 2, "loss": (0.5001).hex()}]]
    loss = loss_spread(trajectories)
    return {
        "schema_version": SCHEMA_VERSION, "repro_gate_version": __version__,
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00",
        "samples": 2,
        "runs": [{"name": f"calibrate-{n}", "steps": 2, "wall_seconds": 1.5,
                  "log_path": f"logs/calibrate-{n}.log"} for n in (1, 2)],
        "steps_compared": len(loss), "loss": loss, "tensors": [], "artifacts_left_out": [],
        "margin": MARGIN, "suggestion": suggest(loss, []).as_dict(),
    }


@pytest.mark.parametrize("samples", [0, 1])
def test_fewer_than_two_samples_are_refused(samples: int) -> None:
    with pytest.raises(GateError) as error:
        check_samples(samples)
    assert str(error.value) == (f"--samples must be at least {MIN_SAMPLES} (a spread needs two"
                                f" runs), got {samples}")
    assert error.value.kind == ErrorKind.CONFIG


def test_two_samples_are_enough() -> None:
    check_samples(MIN_SAMPLES)
    check_samples(5)


def test_a_valid_document_is_written_as_calibration_json(tmp_path: Path) -> None:
    written = document()
    path = write(written, tmp_path)
    assert path == tmp_path / CALIBRATION_NAME
    assert json.loads(path.read_text()) == written


def test_a_document_against_the_schema_is_an_internal_error_and_not_written(
        tmp_path: Path) -> None:
    broken = {**document(), "samples": 1}
    with pytest.raises(GateError, match=r"calibration\.json does not match its schema") as error:
        write(broken, tmp_path)
    assert error.value.kind == ErrorKind.INTERNAL
    assert not (tmp_path / CALIBRATION_NAME).exists()
