"""A stand-in for the GitHub Actions runner, for the runner service's tests (standard library).

The real runner cannot be downloaded here. This one does what the service depends on, in the
order the real one does it for a JIT-configured ephemeral runner given one job:

1. `STANDIN_CRASH=1`: exit 3 at once (a runner that crashes before taking a job);
2. decode ACTIONS_RUNNER_INPUT_JITCONFIG (base64 JSON from the fake GitHub: runner_id, name,
   scope, work_folder), as the actions/runner image's run.sh reads it;
3. run the job-started hook ($ACTIONS_RUNNER_HOOK_JOB_STARTED, a `.sh`, with `sh -e` as the
   runner runs `.sh` hooks) with GITHUB_ENV set to `<work_folder>/_temp/github_env`. With
   `STANDIN_NVIDIA_SMI=1` an `nvidia-smi` is on the hook's PATH that lists the GPUs the
   container was given (NVIDIA_VISIBLE_DEVICES, as the NVIDIA runtime would show them), or
   those of `STANDIN_VISIBLE_GPUS` (a runtime that handed over another GPU), so the hook checks
   visibility for real;
4. when the hook exits 0, run the job: `sh -c "$STANDIN_JOB"` (default `true`) in
   `<work_folder>/repo/repo` with the variables the hook wrote to GITHUB_ENV exported, as the
   runner exports them to a job's later steps;
5. print one line `STANDIN-RESULT {"runner_id":…, "hook_exit":…, "job_exit":…, "github_env":…}`
   (job_exit null when the hook refused the job) and exit 0, as an ephemeral runner does after
   its one job, whatever the job's outcome.

Runs as root or as uid 1001 (the actions/runner image's user): it writes only under the work
folder.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CRASH_VARIABLE = "STANDIN_CRASH"
JOB_VARIABLE = "STANDIN_JOB"
JIT_VARIABLE = "ACTIONS_RUNNER_INPUT_JITCONFIG"
SMI_VARIABLE = "STANDIN_NVIDIA_SMI"
VISIBLE_VARIABLE = "STANDIN_VISIBLE_GPUS"
HOOK_VARIABLE = "ACTIONS_RUNNER_HOOK_JOB_STARTED"
RESULT_PREFIX = "STANDIN-RESULT "
CRASH_EXIT = 3
BAD_CONFIG_EXIT = 2
DEFAULT_JOB = "true"
REPOSITORY_PATH = ("repo", "repo")  # the runner's `_work/<repo>/<repo>` workspace layout


class BadConfig(Exception):
    """ACTIONS_RUNNER_INPUT_JITCONFIG is missing or not what the fake GitHub hands out."""


@dataclass(frozen=True)
class JitConfig:
    runner_id: int
    name: str
    work_folder: Path


def read_jit_config(environ: dict[str, str]) -> JitConfig:
    """The JIT config the service passed in, decoded."""
    encoded = environ.get(JIT_VARIABLE, "")
    if not encoded:
        raise BadConfig(f"{JIT_VARIABLE} is not set")
    try:
        document = json.loads(base64.b64decode(encoded, validate=True))
        return JitConfig(int(document["runner_id"]), str(document["name"]),
                         Path(document["work_folder"]))
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise BadConfig(f"{JIT_VARIABLE} is not a base64 JSON JIT config: {error}") from error


def fake_nvidia_smi(environ: dict[str, str], folder: Path) -> None:
    """An `nvidia-smi` in `folder` whose `-L` lists the GPUs this container was given."""
    visible = environ.get(VISIBLE_VARIABLE) or environ.get("NVIDIA_VISIBLE_DEVICES", "")
    listing = "".join(f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: {uuid})\\n"
                      for index, uuid in enumerate(visible.replace(",", " ").split()))
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 2\nprintf '{listing}'\n",
                   encoding="utf-8")
    smi.chmod(0o755)


def run_hook(environ: dict[str, str], github_env: Path) -> int:
    """The job-started hook's exit code; 0 when none is configured (the runner runs none)."""
    hook = environ.get(HOOK_VARIABLE, "")
    if not hook:
        return 0
    hook_environ = {**environ, "GITHUB_ENV": str(github_env)}
    if environ.get(SMI_VARIABLE) == "1":
        tools = github_env.parent / "standin-bin"
        fake_nvidia_smi(environ, tools)
        hook_environ["PATH"] = f"{tools}:{environ.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(["sh", "-e", hook], env=hook_environ, check=False).returncode


def github_env_variables(text: str) -> dict[str, str]:
    """The variables of a GITHUB_ENV file: `NAME=value` lines and `NAME<<DELIMITER` blocks."""
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            found[name] = "\n".join(block)
        elif "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def run_job(environ: dict[str, str], work_folder: Path, exported: dict[str, str]) -> int:
    """The job script's exit code, run in the repository's workspace."""
    workspace = work_folder.joinpath(*REPOSITORY_PATH)
    workspace.mkdir(parents=True, exist_ok=True)
    job_environ = {**environ, **exported, "GITHUB_WORKSPACE": str(workspace),
                   "RUNNER_TEMP": str(work_folder / "_temp")}
    script = environ.get(JOB_VARIABLE) or DEFAULT_JOB
    return subprocess.run(["sh", "-c", script], cwd=workspace, env=job_environ,
                          check=False).returncode


def main() -> int:
    environ = dict(os.environ)
    if environ.get(CRASH_VARIABLE) == "1":
        print(f"standin runner: {CRASH_VARIABLE}=1, crashing", file=sys.stderr)
        return CRASH_EXIT
    try:
        config = read_jit_config(environ)
    except BadConfig as error:
        print(f"standin runner: {error}", file=sys.stderr)
        return BAD_CONFIG_EXIT
    temp = config.work_folder / "_temp"
    temp.mkdir(parents=True, exist_ok=True)
    github_env = temp / "github_env"
    github_env.touch()
    print(f"standin runner: {config.name} (id {config.runner_id}) took a job", flush=True)
    hook_exit = run_hook(environ, github_env)
    written = github_env.read_text(encoding="utf-8")
    job_exit = None
    if hook_exit == 0:
        job_exit = run_job(environ, config.work_folder, github_env_variables(written))
    result = {"runner_id": config.runner_id, "hook_exit": hook_exit, "job_exit": job_exit,
              "github_env": written}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
