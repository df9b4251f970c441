"""Installing the job-started hook that every runner container of the service runs.

The Actions runner runs the script named by ACTIONS_RUNNER_HOOK_JOB_STARTED before a job's first
step, and accepts `.sh` (or `.ps1`) scripts only; a non-zero exit fails the job before any of its
steps run. So the hook is a small `.sh` that runs the Python check beside it
(`_repro_gate_job_started.py`, standard library only: the runner image has no repro_gate). The
service installs both in a folder it mounts read-only into each runner container, and sets the
variables `runner_environment` returns.

The hook tells the service its outcome through a file in the slot's status folder (mounted at
CONTAINER_STATUS_DIR): the service polls it with `read_status`, and a status appearing means
a job started on the slot.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path

from repro_gate.runner.slots import Slot

HOOK_VARIABLE = "ACTIONS_RUNNER_HOOK_JOB_STARTED"
# The check reads these; each equals the check module's own constant (tests).
SLOT_VARIABLE = "REPRO_GATE_SLOT_UUID"
STATUS_VARIABLE = "REPRO_GATE_HOOK_STATUS"
ALLOW_NO_GPU_VARIABLE = "REPRO_GATE_HOOK_ALLOW_NO_GPU"
REPOSITORY_VARIABLE = "REPRO_GATE_HOOK_REPOSITORY"
CHECK_MODULE = "_repro_gate_job_started.py"
SCRIPT_NAME = "repro-gate-job-started.sh"
CONTAINER_HOOK_DIR = "/opt/repro-gate/hooks"  # where the runner container sees the folder
CONTAINER_STATUS_DIR = "/opt/repro-gate/status"  # where it sees the slot's status folder
STATUS_FILE = "hook-status.json"
UNREADABLE = "unreadable"  # the detail of a status file that is not the hook's JSON

WRAPPER = """#!/bin/sh
# repro-gate job-started hook: the Actions runner takes .sh hooks only; the check is Python.
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "repro-gate hook: refusing the job: python3 is not in the runner image" >&2
  exit 1
fi
exec python3 "$here/{module}"
"""


class HookOutcome(str, Enum):
    ACCEPTED = "accepted"
    REFUSED = "refused"


@dataclass(frozen=True)
class HookStatus:
    """What the hook decided for the job that started on a slot."""

    outcome: HookOutcome
    detail: str  # the slot's UUID when accepted, the reason when refused


@dataclass(frozen=True)
class InstalledHook:
    """The hook's files on the host."""

    script: Path  # the `.sh` the runner runs
    check: Path  # the Python check it runs


def install(folder: Path) -> InstalledHook:
    """Write the hook into `folder` (created if needed), replacing an older copy."""
    folder.mkdir(parents=True, exist_ok=True)
    # The runner's user (not root) must enter the folder, whatever the service's umask.
    folder.chmod(0o755)
    check = folder / CHECK_MODULE
    source = resources.files("repro_gate.runner").joinpath(CHECK_MODULE)
    with resources.as_file(source) as path:
        shutil.copyfile(path, check)
    script = folder / SCRIPT_NAME
    script.write_text(WRAPPER.format(module=CHECK_MODULE), encoding="utf-8")
    check.chmod(0o644)
    script.chmod(0o755)
    return InstalledHook(script, check)


def runner_environment(slot: Slot, *, allow_no_gpu: bool = False,
                       repository: str | None = None) -> dict[str, str]:
    """The variables a slot's runner container starts with for the hook; `repository`, on a
    slot dedicated to one, makes the hook refuse every other repository's job."""
    environment = {HOOK_VARIABLE: f"{CONTAINER_HOOK_DIR}/{SCRIPT_NAME}",
                   SLOT_VARIABLE: slot.uuid,
                   STATUS_VARIABLE: f"{CONTAINER_STATUS_DIR}/{STATUS_FILE}"}
    if allow_no_gpu:
        environment[ALLOW_NO_GPU_VARIABLE] = "1"
    if repository is not None:
        environment[REPOSITORY_VARIABLE] = repository
    return environment


def read_status(status_dir: Path) -> HookStatus | None:
    """The hook's status in a slot's status folder; None while no job has started. A file that
    is not what the hook writes is a refusal: the service cannot tell the job was checked."""
    try:
        text = (status_dir / STATUS_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return HookStatus(HookOutcome.REFUSED, UNREADABLE)
    try:
        document = json.loads(text)
        outcome = HookOutcome(document["outcome"])
        detail = document["uuid" if outcome is HookOutcome.ACCEPTED else "reason"]
    except (ValueError, KeyError, TypeError):  # JSONDecodeError is a ValueError
        return HookStatus(HookOutcome.REFUSED, UNREADABLE)
    if not isinstance(detail, str):
        return HookStatus(HookOutcome.REFUSED, UNREADABLE)
    return HookStatus(outcome, detail)
