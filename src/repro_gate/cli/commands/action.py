"""`repro-gate action`: the entrypoint of the GitHub Docker action.

The runner hands the action's inputs over as `INPUT_<NAME>` variables (upper-cased, hyphens
kept: `INPUT_GITHUB-TOKEN`). They override the config file, the gate runs, and the verdict is
published as step outputs, a job summary and annotations.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from repro_gate.config import loader as config_loader
from repro_gate.errors import EXIT_ERROR, ConfigError, GateError
from repro_gate.gate import pipeline as gate
from repro_gate.launch.base import LineSink
from repro_gate.publish import actions as github_actions
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
    token = action_input(environ, "github-token")
    if token:
        github_actions.add_mask(token)
    try:
        config_path = _config_path(environ)
        effective = config_loader.load(config_path, overrides_from_inputs(environ), Path.cwd())
    except GateError as error:
        return _early_error(error, environ)
    if effective.get("image") and "gpus" not in effective:
        effective["gpus"] = DEFAULT_ACTION_GPUS
    sinks = GroupedSinks()
    try:
        outcome = gate.run_gate(effective, sinks)
    finally:
        sinks.close()
    print(console.render(outcome.manifest, _shown(outcome.manifest_path), outcome.error_detail))
    github_actions.publish(outcome.manifest, environ, manifest_path=outcome.manifest_path)
    return outcome.exit_code


def action_input(environ: Mapping[str, str], name: str) -> str:
    """The value of input `name` as the runner passes it (`INPUT_` + upper-cased name), trimmed."""
    return environ.get(f"INPUT_{name.replace(' ', '_').upper()}", "").strip()


def overrides_from_inputs(environ: Mapping[str, str]) -> dict[str, Any]:
    """Config keys set through non-empty action inputs, shaped like the config file."""
    overrides: dict[str, Any] = {}
    text_inputs = {
        "name": "name",
        "image": "image",
        "baseline": "baseline",
        "network": "network",
        "output-dir": "output_dir",
        "working-directory": "workdir",
    }
    for input_name, key in text_inputs.items():
        if value := action_input(environ, input_name):
            overrides[key] = value
    if command := action_input(environ, "command"):
        overrides["command"] = command
    if artifacts := action_input(environ, "artifacts"):
        overrides["artifacts"] = split_list(artifacts)
    if runs := action_input(environ, "runs"):
        overrides["runs"] = _number("runs", runs, int)
    if timeout := action_input(environ, "timeout"):
        overrides["timeout"] = _number("timeout", timeout, float)
    if tolerance := action_input(environ, "tolerance"):
        overrides["tolerance"] = config_loader.parse_tolerance(tolerance)
    if gpus := action_input(environ, "gpus"):
        overrides["gpus"] = parse_gpus(gpus)
    if url := action_input(environ, "pushgateway-url"):
        overrides.setdefault("metrics", {})["pushgateway_url"] = url
    if slot := action_input(environ, "runner-slot"):
        overrides.setdefault("metrics", {})["runner_slot"] = slot
    return overrides


def split_list(text: str) -> list[str]:
    """Globs given one per line or separated by commas."""
    return [part.strip() for line in text.splitlines() for part in line.split(",") if part.strip()]


def parse_gpus(text: str) -> str | int | list[str]:
    """'all', 'none', a count, or comma-separated device IDs/UUIDs."""
    if text in ("all", "none"):
        return text
    if text.isdigit():
        return int(text)
    return split_list(text)


def _number(name: str, text: str, kind: Callable[[str], Any]) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"input {name}: must be a number, got {text!r}") from None


def _config_path(environ: Mapping[str, str]) -> Path | None:
    value = action_input(environ, "config")
    return Path(value) if value else None


def _early_error(error: GateError, environ: Mapping[str, str]) -> int:
    """A configuration problem: no runs, but the step still gets its outputs and summary."""
    print(f"repro-gate: error: {error.message}", file=sys.stderr)
    github_actions.emit(github_actions.command("error", error.message, title="repro-gate"))
    output_dir = action_input(environ, "output-dir") or config_loader.DEFAULTS["output_dir"]
    outcome = gate.config_error_outcome(error, Path(output_dir).absolute())
    github_actions.publish(outcome.manifest, environ, manifest_path=outcome.manifest_path)
    return EXIT_ERROR


def _shown(path: Path | None) -> str | None:
    return None if path is None else str(path)


class GroupedSinks:
    """A sink factory for the gate: each run's output folded into its own log group.

    Workflow commands are switched off while a run prints, so the training cannot set outputs,
    masks or annotations by printing `::...::` lines.
    """

    def __init__(self) -> None:
        self._resume_token: str | None = None

    def __call__(self, name: str) -> LineSink:
        self.close()
        github_actions.emit(github_actions.command("group", f"repro-gate run {name}"))
        self._resume_token = secrets.token_hex(16)
        github_actions.emit(github_actions.command("stop-commands", self._resume_token))

        def sink(line: str) -> None:
            print(f"[{name}] {line}", flush=True)

        return sink

    def close(self) -> None:
        """End the current run's group, if one is open."""
        if self._resume_token is not None:
            github_actions.emit(f"::{self._resume_token}::")
            github_actions.emit("::endgroup::")
            self._resume_token = None
