"""`repro-gate calibrate`: the training run N times with determinism off, and the tolerance its
spread suggests for `golden.tolerance`.

    runs.py      `run_calibration`: the N default-mode runs, the spread, calibration.json
    spread.py    the per-step spread of the loss and of the artifacts' tensor summaries
    suggest.py   the suggested tolerance from a spread, and its YAML

It sits beside upgrade/, above gate/: its runs are the gate's default-mode runs.
"""

from __future__ import annotations

from repro_gate.calibrate.runs import (
    CALIBRATION_NAME,
    DEFAULT_SAMPLES,
    MIN_SAMPLES,
    run_calibration,
)

__all__ = ["CALIBRATION_NAME", "DEFAULT_SAMPLES", "MIN_SAMPLES", "run_calibration"]
