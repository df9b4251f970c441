"""`repro-gate check`: run the training twice deterministically, compare, and give a verdict."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate import config, publish
from repro_gate.cli.flags import add_config_options
from repro_gate.cli.session import PLAIN, Output, Session, shown_path, warn_on_stderr
from repro_gate.cli.sinks import stderr_sink_for
from repro_gate.config import DEFAULT_OUTPUT_DIR, overrides
from repro_gate.errors import GateError
from repro_gate.gate.pipeline import GateOutcome, configuration_error, run_gate
from repro_gate.launch import launcher_for
from repro_gate.render import console

EPILOG = """\
exit codes: 0 pass (reproducible), 1 fail (not reproducible, or over the cost budget
cost.max_pct), 2 error (bad input, a run crashed or timed out, nothing to compare), 3 refused (a
fork's pull request on a self-hosted runner: docs/action.md#pull-requests-from-forks). Without a
config file or command, the embedded reference training runs.
examples:
  repro-gate check
  repro-gate check --artifacts 'checkpoints/*.pt' -- python train.py --epochs 1
"""


def add_parser(subparsers: Any, name: str) -> None:
    """Register `check` and its options."""
    parser = subparsers.add_parser(
        name,
        help="run the training twice with determinism on (and once off) and compare",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_options(parser)
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON on stdout")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not stream the runs' output (it is still logged to files)")
    parser.add_argument("trailing_command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="training command as separate words, run without a shell"
                             " (instead of --command)")


def run(args: argparse.Namespace) -> int:
    """`repro-gate check`: its flags as `check`'s parameters (the one place that reads them)."""
    output = Output(as_json=args.json, quiet=args.quiet, wait=args.wait)
    with session(args.output_dir, output).recording():
        flag_overrides = overrides.from_flags(args)
    return check(Path(args.config) if args.config else None, flag_overrides, output)


def check(
    config_path: Path | None, flag_overrides: Mapping[str, Any], output: Output = PLAIN
) -> int:
    """Load the config, run the gate, print the report; returns the verdict's exit code."""
    gate_session = session(flag_overrides.get("output_dir"), output)
    effective = gate_session.configure(
        lambda: config.load(config_path, dict(flag_overrides), Path.cwd()))
    publisher = publish.for_gate(effective)
    return gate_session.run(
        effective,
        lambda sinks: run_gate(effective, launcher_for, publisher, sinks),
        lambda outcome: _render(outcome, output.as_json),
    )


def session(output_dir: str | None, output: Output) -> Session:
    """The lifecycle of a gate run from the command line: warnings and runs' output on stderr,
    an error manifest when nothing ran."""
    def record(error: GateError) -> None:
        directory = Path(output_dir or DEFAULT_OUTPUT_DIR).absolute()
        _record_configuration_error(error, directory, output.as_json)

    return Session(warn=warn_on_stderr, record_error=record,
                   sinks=stderr_sink_for(output.quiet), wait=output.wait)


def _render(outcome: GateOutcome, as_json: bool) -> str:
    if as_json:
        return json.dumps(outcome.manifest, indent=2)
    return console.render(outcome.manifest, shown_path(outcome.manifest_path),
                          outcome.error_detail)


def _record_configuration_error(error: GateError, output_dir: Path, as_json: bool) -> None:
    """Nothing ran; an error manifest is still written and published to the Actions step."""
    outcome = configuration_error(error, output_dir, publish.for_configuration_error())
    if as_json:
        print(json.dumps(outcome.manifest, indent=2))
