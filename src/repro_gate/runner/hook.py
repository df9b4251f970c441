"""Installing the job-started hook that every runner container of the service runs.

The Actions runner runs the script named by ACTIONS_RUNNER_HOOK_JOB_STARTED before a job's first
step, and accepts `.sh` (or `.ps1`) scripts only; a non-zero exit fails the job before any of its
steps run. So the hook is a small `.sh` that runs the Python check beside it
(`_repro_gate_job_started.py`, standard library only: the runner image has no repro_gate). The
service installs both in a folder it mounts read-only into each runner container, and sets the
two variables `runner_environment` returns.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from repro_gate.runner.slots import Slot

HOOK_VARIABLE = "ACTIONS_RUNNER_HOOK_JOB_STARTED"
SLOT_VARIABLE = "REPRO_GATE_SLOT_UUID"  # the check reads it; equal to its own constant (tests)
CHECK_MODULE = "_repro_gate_job_started.py"
SCRIPT_NAME = "repro-gate-job-started.sh"
CONTAINER_HOOK_DIR = "/opt/repro-gate/hooks"  # where the runner container sees the folder

WRAPPER = """#!/bin/sh
# repro-gate job-started hook: the Actions runner takes .sh hooks only; the check is Python.
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
  echo "repro-gate hook: refusing the job: python3 is not in the runner image" >&2
  exit 1
fi
exec python3 "$here/{module}"
"""


@dataclass(frozen=True)
class InstalledHook:
    """The hook's files on the host."""

    script: Path  # the `.sh` the runner runs
    check: Path  # the Python check it runs


def install(folder: Path) -> InstalledHook:
    """Write the hook into `folder` (created if needed), replacing an older copy."""
    folder.mkdir(parents=True, exist_ok=True)
    check = folder / CHECK_MODULE
    source = resources.files("repro_gate.runner").joinpath(CHECK_MODULE)
    with resources.as_file(source) as path:
        shutil.copyfile(path, check)
    script = folder / SCRIPT_NAME
    script.write_text(WRAPPER.format(module=CHECK_MODULE), encoding="utf-8")
    check.chmod(0o644)
    script.chmod(0o755)
    return InstalledHook(script, check)


def runner_environment(slot: Slot, hook_dir: str = CONTAINER_HOOK_DIR) -> dict[str, str]:
    """The variables a slot's runner container starts with for the hook."""
    return {HOOK_VARIABLE: f"{hook_dir}/{SCRIPT_NAME}", SLOT_VARIABLE: slot.uuid}
