"""`repro-gate action`: the entrypoint of the GitHub Docker action.

The runner hands the action's inputs over as `INPUT_<NAME>` variables (upper-cased, hyphens
kept: `INPUT_GITHUB-TOKEN`). They override the config file, the gate runs, and the verdict is
published as step outputs, a job summary and annotations.

`mode: upgrade` runs the dependency-upgrade check instead (`repro-gate upgrade`): on a pull
request without `candidate-lock`, the base commit's lock against the pull request's; else the
lock against a given candidate (`candidate-lock`) or one computed by uv (`upgrade-packages`).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro_gate import config, publish
from repro_gate.cli.session import Session
from repro_gate.cli.sinks import GroupedSinks, notices_on_stdout
from repro_gate.config import DEFAULT_OUTPUT_DIR, Config, overrides
from repro_gate.environments import find_lock
from repro_gate.errors import ConfigError, ErrorKind, GateError
from repro_gate.gate.pipeline import configuration_error, run_gate
from repro_gate.launch import launcher_for
from repro_gate.publish import actions, attest_outputs
from repro_gate.publish.github.event import PULL_REQUEST_EVENTS, read_event_payload
from repro_gate.render import console
from repro_gate.upgrade import UpgradeRequest
from repro_gate.upgrade.base_lock import base_lock

if TYPE_CHECKING:
    from repro_gate.upgrade.check import UpgradeOptions

MODES = ("check", "upgrade")  # the input `mode`; the first is the default
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")  # python, python3, python3.12
TORCH_CHECK_SECONDS = 300.0  # importing torch from a cold disk takes a while


def add_parser(subparsers: Any, name: str) -> None:
    """Register `action` (no options: it reads the INPUT_* variables)."""
    subparsers.add_parser(
        name,
        help="entrypoint of the GitHub Docker action (reads INPUT_* variables)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def run(args: argparse.Namespace) -> int:
    """`repro-gate action`: no flags; the inputs are the environment's INPUT_* variables."""
    return action(os.environ)


def action(environ: Mapping[str, str]) -> int:
    """Run the gate configured by the action inputs and publish its result to the step."""
    session = Session(warn=_annotate_warning,
                      record_error=lambda error: _record_configuration_error(error, environ),
                      sinks=GroupedSinks(), environ=environ, notices=notices_on_stdout)
    session.mask()  # first: an error record published to the step must not show a credential
    with session.recording():
        mode = overrides.action_input(environ, "mode") or MODES[0]
        if mode not in MODES:
            raise ConfigError(f"input mode: must be check or upgrade, got {mode!r}")
        attest_outputs.requested(environ)  # a bad value stops the gate before any run
    config_path = Path(value) if (value := overrides.action_input(environ, "config")) else None
    effective = session.configure(
        lambda: config.load(config_path, overrides.from_action_inputs(environ), Path.cwd()))
    if mode == "check":
        with session.recording():
            check_torch_without_image(effective, environ)
    effective = effective.in_action()
    if mode == "upgrade":
        return _run_upgrade(session, effective, environ)
    publisher = publish.for_gate(effective, environ)
    return session.run(
        effective,
        lambda sinks: run_gate(effective, launcher_for, publisher, sinks),
        lambda outcome: console.render(outcome.manifest, _shown(outcome.manifest_path),
                                       outcome.error_detail),
    )


def check_torch_without_image(effective: Config, environ: Mapping[str, str]) -> None:
    """Without `image:` the training runs in the action's own image, which has no torch: a
    Python training (the reference training included) is refused before any run unless its
    interpreter there imports torch. An interpreter that cannot start is left to the run."""
    if effective.container.image:
        return
    python = training_python(effective)
    if python is None:
        return
    try:
        completed = subprocess.run(
            [python, "-c", "import torch"], cwd=effective.workdir, capture_output=True,
            env={**environ, **effective.env}, timeout=TORCH_CHECK_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return
    if completed.returncode != 0:
        raise GateError(
            f"`{python} -c \"import torch\"` fails in the action's own image, which runs the"
            " training when `image` is not set: set the input `image` to the training's image",
            kind=ErrorKind.IMAGE_REQUIRED)


def training_python(effective: Config) -> str | None:
    """The interpreter a Python training starts with (the command's first word, or the
    reference training's); None when the command is not a Python training."""
    if not effective.command:
        return sys.executable  # what the local launcher runs the reference training with
    try:
        first = (shlex.split(effective.command) if isinstance(effective.command, str)
                 else list(effective.command))[0]
    except (ValueError, IndexError):  # the shell will say what is wrong with it
        return None
    return first if PYTHON_NAME.fullmatch(Path(first).name) else None


def _run_upgrade(session: Session, effective: Config, environ: Mapping[str, str]) -> int:
    """mode upgrade: the upgrade check, published as its own check run, comment and outputs."""
    from repro_gate.publish.upgrade_report import for_upgrade_configuration_error
    from repro_gate.render import upgrade_console
    from repro_gate.upgrade.check import configuration_error as upgrade_error
    from repro_gate.upgrade.check import run_upgrade

    def record(error: GateError) -> None:  # no lock, or no base commit: nothing could run
        actions.emit(actions.annotation("error", error.message, title="repro-gate"))
        upgrade_error(error, effective.workdir, effective.output_dir,
                      for_upgrade_configuration_error(environ))

    with session.recording(record):
        options = upgrade_options(effective, environ)
    publisher = publish.for_upgrade(effective, environ)
    return session.run(
        effective,
        lambda sinks: run_upgrade(effective, options, launcher_for, publisher, sinks),
        lambda outcome: upgrade_console.render(outcome.document, _shown(outcome.path)),
    )


def upgrade_options(effective: Config, environ: Mapping[str, str]) -> UpgradeOptions:
    """The candidate from the inputs: `candidate-lock`; on a pull request, the base commit's
    lock against the pull request's; else the lock upgraded by uv (`upgrade-packages`)."""
    from repro_gate.upgrade.check import UPGRADE_SUBDIR, CandidateSource, UpgradeOptions

    write_lock = overrides.parse_boolean(
        "input write-lock", overrides.action_input(environ, "write-lock") or "false")
    given = overrides.action_input(environ, "candidate-lock")
    packages = tuple(overrides.split_list(overrides.action_input(environ, "upgrade-packages")))
    if given and packages:
        raise ConfigError("input candidate-lock gives the candidate and upgrade-packages"
                          " computes one: set only one of them")
    if given:
        return UpgradeOptions(CandidateSource(lock=Path(given).absolute()), write_lock=write_lock)
    base = _pull_request_base(environ)
    if base is None:
        return UpgradeOptions(CandidateSource(request=UpgradeRequest(packages)),
                              write_lock=write_lock)
    workspace_lock = find_lock(effective.workdir, effective.upgrade.lock)
    baseline = base_lock(effective.workdir, workspace_lock, base,
                         effective.output_dir / UPGRADE_SUBDIR / "base")
    return UpgradeOptions(CandidateSource(lock=workspace_lock), baseline_lock=baseline,
                          write_lock=write_lock)


def _pull_request_base(environ: Mapping[str, str]) -> str | None:
    """The base commit of the pull request the workflow runs for; None on other events."""
    if environ.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None
    pull_request = read_event_payload(environ).get("pull_request")
    base = pull_request.get("base") if isinstance(pull_request, Mapping) else None
    sha = base.get("sha") if isinstance(base, Mapping) else None
    if not isinstance(sha, str) or not sha:
        raise ConfigError("the pull_request event names no base commit (pull_request.base.sha):"
                          " set candidate-lock")
    return sha


def _record_configuration_error(error: GateError, environ: Mapping[str, str]) -> None:
    """A configuration problem: no runs, but the step still gets its outputs and summary."""
    actions.emit(actions.annotation("error", error.message, title="repro-gate"))
    output_dir = overrides.action_input(environ, "output-dir") or DEFAULT_OUTPUT_DIR
    publisher = publish.for_configuration_error(environ)
    configuration_error(error, Path(output_dir).absolute(), publisher)


def _annotate_warning(warning: str) -> None:
    """A warning before any run, as an annotation on the step."""
    actions.emit(actions.annotation("warning", warning, title="repro-gate"))


def _shown(path: Path | None) -> str | None:
    return None if path is None else str(path)
