"""`repro-gate check`: run the training twice deterministically, compare, and give a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from repro_gate.cli.flags import add_config_options, overrides_from_args
from repro_gate.config import loader as config_loader
from repro_gate.errors import EXIT_ERROR, GateError
from repro_gate.gate import pipeline as gate
from repro_gate.publish import actions as github_actions
from repro_gate.render import console

EPILOG = """\
exit codes: 0 pass (reproducible), 1 fail (not reproducible), 2 error (bad input, a run crashed or
timed out, nothing to compare). Without a config file or command, the embedded reference
training runs.
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
                        help="training command (instead of --command)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load the config, run the gate, print the report; returns the verdict's exit code."""
    try:
        effective = config_loader.load(
            Path(args.config) if args.config else None, overrides_from_args(args), Path.cwd()
        )
    except GateError as error:
        return _config_error(error, args)
    outcome = gate.run_gate(effective, gate.stderr_sink_for(args.quiet))
    github_actions.publish(outcome.manifest, manifest_path=outcome.manifest_path)
    if args.json:
        print(json.dumps(outcome.manifest, indent=2))
    else:
        print(console.render(outcome.manifest, _shown_path(outcome.manifest_path),
                             outcome.error_detail))
    return outcome.exit_code


def _config_error(error: GateError, args: argparse.Namespace) -> int:
    print(f"repro-gate: error: {error.message}", file=sys.stderr)
    output_dir = Path(args.output_dir or config_loader.DEFAULTS["output_dir"]).absolute()
    outcome = gate.config_error_outcome(error, output_dir)
    github_actions.publish(outcome.manifest, manifest_path=outcome.manifest_path)
    if args.json:
        print(json.dumps(outcome.manifest, indent=2))
    return EXIT_ERROR


def _shown_path(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
