"""`repro-gate action`: the entrypoint of the GitHub Docker action.

The runner hands the action's inputs over as `INPUT_<NAME>` variables (upper-cased, hyphens
kept: `INPUT_GITHUB-TOKEN`). They override the config file, the gate runs, and the verdict is
published as step outputs, a job summary and annotations.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate import config, publish
from repro_gate.cli.sinks import GroupedSinks
from repro_gate.config import DEFAULT_OUTPUT_DIR, overrides
from repro_gate.errors import GateError
from repro_gate.gate import lock
from repro_gate.gate.pipeline import configuration_error, run_gate
from repro_gate.launch import cancel, launcher_for
from repro_gate.publish import actions
from repro_gate.render import console

DEFAULT_ACTION_GPUS = "all"  # the action is meant for GPU runners


def add_parser(subparsers: Any, name: str) -> None:
    """Register `action` (no options: it reads the INPUT_* variables)."""
    parser = subparsers.add_parser(
        name,
        help="entrypoint of the GitHub Docker action (reads INPUT_* variables)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the gate configured by the action inputs and publish its result to the step."""
    environ = os.environ
    actions.mask_credentials(environ)
    try:
        config_path = Path(value) if (value := overrides.action_input(environ, "config")) else None
        effective = config.load(config_path, overrides.from_action_inputs(environ), Path.cwd())
    except GateError as error:
        _record_configuration_error(error, environ)
        raise
    if effective.container.image and effective.container.gpus is None:
        container = dataclasses.replace(effective.container, gpus=DEFAULT_ACTION_GPUS)
        effective = dataclasses.replace(effective, container=container)
    sinks = GroupedSinks()
    try:
        with cancel.on_signals(), lock.hold(effective, wait=False):
            outcome = run_gate(effective, launcher_for, publish.for_gate(effective, environ), sinks)
    finally:
        sinks.close()
    shown = None if outcome.manifest_path is None else str(outcome.manifest_path)
    print(console.render(outcome.manifest, shown, outcome.error_detail))
    return outcome.exit_code


def _record_configuration_error(error: GateError, environ: Mapping[str, str]) -> None:
    """A configuration problem: no runs, but the step still gets its outputs and summary."""
    actions.emit(actions.command("error", error.message, title="repro-gate"))
    output_dir = overrides.action_input(environ, "output-dir") or DEFAULT_OUTPUT_DIR
    publisher = publish.for_configuration_error(environ)
    configuration_error(error, Path(output_dir).absolute(), publisher)
