"""`repro-gate calibrate`: run the training N times with determinism off, write the spread to
calibration.json and print the golden.tolerance it suggests."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate import config
from repro_gate.calibrate import DEFAULT_SAMPLES, MIN_SAMPLES, run_calibration
from repro_gate.calibrate.runs import CalibrationOutcome, check_samples
from repro_gate.cli.flags import add_config_options
from repro_gate.cli.session import Session, shown_path, warn_on_stderr
from repro_gate.cli.sinks import stderr_sink_for
from repro_gate.config import overrides
from repro_gate.errors import GateError
from repro_gate.launch import launcher_for

EPILOG = f"""\
Each run is a default-mode run like the gate's noise floor: determinism off and no seed from the
gate. The suggestion is twice the largest difference seen, rounded up; paste it into the config.
exit codes: 0 written, 2 error (fewer than {MIN_SAMPLES} samples, a run crashed or timed out).
examples:
  repro-gate calibrate --samples 5
  repro-gate calibrate --samples 3 --artifacts 'model.pt' -- python train.py
"""


def add_parser(subparsers: Any, name: str) -> None:
    """Register `calibrate` and its options (the gate's configuration flags too)."""
    parser = subparsers.add_parser(
        name,
        help="run the training N times with determinism off and suggest golden.tolerance",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, metavar="N",
                        help=f"how many runs (at least {MIN_SAMPLES}; default {DEFAULT_SAMPLES})")
    add_config_options(parser)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not stream the runs' output (it is still logged to files)")
    parser.add_argument("trailing_command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="training command as separate words, run without a shell"
                             " (instead of --command)")


def run(args: argparse.Namespace) -> int:
    """`repro-gate calibrate`: its flags as `calibrate`'s parameters."""
    flag_overrides = overrides.from_flags(args)
    return calibrate(Path(args.config) if args.config else None, flag_overrides, args.samples,
                     quiet=args.quiet, wait=args.wait)


def calibrate(config_path: Path | None, flag_overrides: Mapping[str, Any], samples: int,
              quiet: bool = False, wait: bool = False) -> int:
    """Load the config, run the calibration, print where it went and the suggestion."""
    check_samples(samples)  # before any config is read or run started

    def record(error: GateError) -> None:
        """Nothing to record: calibration.json is only written complete."""

    session = Session(warn=warn_on_stderr, record_error=record,
                      sinks=stderr_sink_for(quiet), wait=wait)
    effective = session.configure(
        lambda: config.load(config_path, dict(flag_overrides), Path.cwd()))
    return session.run(
        effective,
        lambda sinks: run_calibration(effective, launcher_for, samples, sinks),
        _render,
    )


def _render(outcome: CalibrationOutcome) -> str:
    document = outcome.document
    return (f"# {document['samples']} default-mode runs, {document['steps_compared']} steps"
            f" compared: {shown_path(outcome.path)}\n"
            f"# suggested tolerance ({document['margin']:g}x the largest difference seen):\n"
            f"{outcome.suggestion.yaml()}")
