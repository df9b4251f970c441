"""`repro-gate check`: run the training twice deterministically, compare, and give a verdict."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from repro_gate import config, publish
from repro_gate.cli.flags import add_config_options
from repro_gate.cli.sinks import stderr_sink_for
from repro_gate.config import DEFAULT_OUTPUT_DIR, overrides
from repro_gate.errors import GateError
from repro_gate.gate import file_lock
from repro_gate.gate.pipeline import configuration_error, run_gate
from repro_gate.launch import cancel, launcher_for
from repro_gate.publish import actions
from repro_gate.publish.github.fork_safety import check_fork_safety
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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load the config, run the gate, print the report; returns the verdict's exit code."""
    try:
        config_path = Path(args.config) if args.config else None
        effective = config.load(config_path, overrides.from_flags(args), Path.cwd())
        if warning := check_fork_safety(os.environ, effective.workdir,
                                        effective.allow_fork_pull_requests):
            print(f"repro-gate: warning: {warning}", file=sys.stderr)
    except GateError as error:
        output_dir = Path(args.output_dir or DEFAULT_OUTPUT_DIR).absolute()
        _record_configuration_error(error, output_dir, args.json)
        raise
    actions.mask_credentials()
    publisher = publish.for_gate(effective)
    with cancel.on_signals(), file_lock.hold(effective, args.wait):
        outcome = run_gate(effective, launcher_for, publisher, stderr_sink_for(args.quiet))
    if args.json:
        print(json.dumps(outcome.manifest, indent=2))
    else:
        print(console.render(outcome.manifest, _shown_path(outcome.manifest_path),
                             outcome.error_detail))
    return outcome.exit_code


def _record_configuration_error(error: GateError, output_dir: Path, as_json: bool) -> None:
    """Nothing ran; an error manifest is still written and published to the Actions step."""
    outcome = configuration_error(error, output_dir, publish.for_configuration_error())
    if as_json:
        print(json.dumps(outcome.manifest, indent=2))


def _shown_path(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
