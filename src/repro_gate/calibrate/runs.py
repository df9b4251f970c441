"""The calibration: the configured training N times in default mode (determinism off, no seed
from the gate), as the gate's noise-floor runs, and `calibration.json` from their spread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate import __version__, manifest, validation
from repro_gate.calibrate.spread import loss_spread, tensor_spread
from repro_gate.calibrate.suggest import MARGIN, Suggestion, suggest
from repro_gate.config import Config
from repro_gate.errors import EXIT_PASS, ErrorKind, GateError
from repro_gate.gate import training_run
from repro_gate.gate.pipeline import LauncherFactory, SinkFactory, ensure_writable
from repro_gate.gate.record import now

CALIBRATION_NAME = "calibration.json"  # in the output directory
SCHEMA_VERSION = 1
DEFAULT_SAMPLES = 5
MIN_SAMPLES = 2  # a spread needs two runs
RUN_PREFIX = "calibrate-"  # runs/calibrate-1, logs/calibrate-1.log, ...


@dataclass
class CalibrationOutcome:
    """What `run_calibration` ends with: the document as written, where, the exit code."""

    document: dict[str, Any]
    path: Path
    suggestion: Suggestion
    exit_code: int = EXIT_PASS


def run_calibration(config: Config, open_launcher: LauncherFactory, samples: int,
                    sink_for: SinkFactory) -> CalibrationOutcome:
    """Run the training `samples` times in default mode and write `calibration.json`."""
    check_samples(samples)
    started_at = now()
    ensure_writable(config.output_dir)
    launcher = open_launcher(config)
    records = []
    for index in range(1, samples + 1):
        spec = training_run.build_spec(config, launcher, f"{RUN_PREFIX}{index}", "default",
                                       max_steps=config.cost.steps)
        record = training_run.execute(launcher, spec, sink_for(spec.name), list(config.artifacts))
        failure = training_run.run_failure(record, config.timeout)
        if failure is not None:  # a crashed run's spread would mean nothing
            raise failure
        records.append(record)
    loss = loss_spread([record.trajectory for record in records])
    if not loss:
        raise GateError("the runs recorded no loss to compare: is the training's optimizer"
                        " stepping under the probe?", kind=ErrorKind.NOTHING_TO_COMPARE)
    tensors, skipped = tensor_spread([{a.rel_path: a.path for a in record.artifacts}
                                      for record in records])
    suggestion = suggest(loss, tensors)
    document = {
        "schema_version": SCHEMA_VERSION,
        "repro_gate_version": __version__,
        "started_at": started_at,
        "finished_at": now(),
        "samples": samples,
        "runs": [{"name": r.name, "steps": len(r.trajectory), "wall_seconds": round(
            r.wall_seconds, 6), "log_path": str(r.log_path)} for r in records],
        "steps_compared": len(loss),
        "loss": loss,
        "tensors": tensors,
        "artifacts_left_out": skipped,
        "margin": MARGIN,
        "suggestion": suggestion.as_dict(),
    }
    return CalibrationOutcome(document, write(document, config.output_dir), suggestion)


def check_samples(samples: int) -> None:
    """Refuse fewer than two samples: one run has no spread."""
    if samples < MIN_SAMPLES:
        raise GateError(f"--samples must be at least {MIN_SAMPLES} (a spread needs two runs),"
                        f" got {samples}", kind=ErrorKind.CONFIG)


def write(document: dict[str, Any], output_dir: Path) -> Path:
    """Validate against calibration.schema.json, then write atomically."""
    problems = validation.errors("calibration", document)
    if problems:
        raise GateError("calibration.json does not match its schema: " + problems[0],
                        kind=ErrorKind.INTERNAL)
    path = output_dir / CALIBRATION_NAME
    manifest.write_json_atomic(path, document)
    return path
