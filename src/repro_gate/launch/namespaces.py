"""A local run in its own user, mount, UTS and PID namespace, seeing the workspace through an
overlay.

The run starts under `run_init.py` (its P0 and its PID 1), which builds the run's view of the
files before the training starts:

- The repository holding the workspace, when its root lies above the workspace, is bound
  read-only: a write to `../` never reaches the user's tree.
- The workspace is the lower layer of an overlay mounted at its own path, the upper layer the
  run's `<run_dir>/work`: the run sees the same absolute paths as a bare run, and what it writes,
  overwrites or deletes (a whiteout) lands in the upper layer only. Nothing is copied.
- The gate's folders (the output folder, the lock folder, another gate's output) are hidden
  under an empty tmpfs: run B never sees runs/A. Overlayfs refuses to show a layer inside its
  own merged view (ELOOP), and the default output folder lies inside the workspace; the mask
  keeps lookups away from it.
- The run's own folder (REPRO_GATE_RUN_DIR) is bound writable at its own path inside that mask,
  its probe and environment read-only; the overlay's layers inside the run folder are masked
  read-only (the run must not write a layer while it is mounted). No other run's folder, log
  or record is shown: fail-fast reads run B's trajectory from the gate's side.

A run that varies one factor of the environment (gate/vary_runs.py) may see the overlay at
another path (`mount_at`, a folder in its run folder; the workspace at its own path is then
bound read-only, and the gate's folders are masked at both paths), under another host name
(its UTS namespace's), or over another lower layer (the workspace listed in another order).

When the training's main process exits, its PID 1 exits and the kernel kills every process left
in the namespace before the gate's wait returns: no process of the run can write after it.

One difference from a bare run stays: renaming a folder that comes from the workspace fails
with EXDEV (an unprivileged overlay may not record the rename, `redirect_dir` needs trusted
xattrs). `mv` and `shutil.move` copy instead; `os.rename` does not, and a training that relies
on it runs with REPRO_GATE_NAMESPACES=off.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from repro_gate import notices
from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import RunSpec

INIT = Path(__file__).with_name("run_init.py")
# "off": every run gets a copy instead (tests; a kernel whose overlayfs misbehaves).
ENV_NAMESPACES = "REPRO_GATE_NAMESPACES"
CHECK_SECONDS = 30.0


def usable(output_dir: Path) -> bool:
    """Whether runs writing under `output_dir` get namespaces; where not, a notice says why."""
    reason = refusal(output_dir)
    if reason is not None:
        _notice(reason)
    return reason is None


@functools.cache
def _notice(reason: str) -> None:
    """Once per reason and gate: which working copy the runs get, and why."""
    notices.say(f"working copies: each run gets a copy of the working directory, not an"
                f" overlay in its own namespaces ({reason})")


def refusal(output_dir: Path) -> str | None:
    """Why runs cannot have their own namespaces and overlay here; None when they can."""
    if os.environ.get(ENV_NAMESPACES) == "off":
        return f"{ENV_NAMESPACES}=off"
    if not sys.platform.startswith("linux"):
        return "user namespaces are a Linux feature"
    return _checked(output_dir.resolve())


@functools.cache
def _checked(output_dir: Path) -> str | None:
    """Try once per output folder: its filesystem must take an overlay's upper layer."""
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(init_command("--check", str(output_dir)), capture_output=True,
                              text=True, timeout=CHECK_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the namespace check failed: {error}"
    if done.returncode == 0:
        return None
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return f"the kernel refused them: {said[-1] if said else f'exit {done.returncode}'}"


def init_command(*args: str) -> list[str]:
    """The init run by path, isolated from the run's Python variables (it imports the stdlib)."""
    return [sys.executable, "-I", "-S", str(INIT), *args]


def repository_root(workspace: Path) -> Path | None:
    """The root of the git repository holding `workspace`, when it lies above it. Never the
    home folder or `/` (a dotfiles repository): the training writes its caches there."""
    for folder in (workspace, *workspace.parents):
        if (folder / ".git").exists():
            home = Path(os.path.expanduser("~")).resolve()
            keep = folder == workspace or folder in (home, Path("/"))
            return None if keep else folder
    return None


def under(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(folder) for folder in folders)


def outermost(folders: list[Path]) -> tuple[Path, ...]:
    """The folders not inside another: one mask hides what lies below it (an upgrade check's
    gate writes inside the output folder of the check, itself a gate's folder)."""
    kept: list[Path] = []
    for folder in sorted(set(folders), key=lambda path: len(path.parts)):
        if not under(folder, tuple(kept)):
            kept.append(folder)
    return tuple(kept)


def plan(spec: RunSpec) -> dict[str, object]:
    """What run_init.py mounts for `spec`, in the order it mounts it."""
    assert spec.isolation is not None and spec.workspace is not None
    isolation = spec.isolation
    masks = outermost([path.resolve() for path in spec.hidden if path.is_dir()])
    lower = spec.workspace.resolve()
    mount_at = spec.workspace_at.resolve() if spec.workspace_at is not None else None
    shown = [(spec.run_dir, True), *((path, False) for path in spec.python_path)]
    if spec.python_environment is not None:
        shown.append((spec.python_environment.root, False))
    binds = [(str(path.resolve()), writable) for path, writable in shown
             if path.exists() and under(path.resolve(), masks)]
    root = repository_root(spec.workspace.resolve())
    # The gate's folders inside the workspace, where the moved working copy shows them too.
    moved_masks = [] if mount_at is None else [
        str(mount_at / path.relative_to(lower)) for path in masks if path.is_relative_to(lower)]
    cwd = spec.workdir
    if mount_at is not None:
        cwd = mount_at / spec.workdir.resolve().relative_to(lower)
    return {
        "argv": spec.argv,
        "cwd": str(cwd),
        "lower": str(lower),
        "lower_source": str(isolation.lower or lower),
        "mount_at": None if mount_at is None else str(mount_at),
        "moved_masks": moved_masks,
        "hostname": spec.hostname,
        "upper": str(isolation.upper.resolve()),
        "scratch": str(isolation.scratch.resolve()),
        "read_only": [str(root)] if root is not None else [],
        "masks": [str(path) for path in masks],
        "binds": binds,
        "hidden": [str(isolation.upper.resolve()), str(isolation.scratch.resolve())],
    }


@dataclass(frozen=True)
class Ending:
    """How the training's main process ended, as its init reported it."""

    exit_code: int | None  # a signal's number negated, as subprocess reports it; None: unknown


def read_report(fd: int, spec: RunSpec) -> Ending:
    """How the training ended, from the init's report; the error that kept it from starting
    (its own line, before the exit code 127 that follows it) is raised as the gate's error."""
    with os.fdopen(fd, "rb") as reader:
        lines = reader.read().decode(errors="replace").splitlines()
    reports = [json.loads(line) for line in lines]
    for report in reports:
        _raise_failure(report, spec)
    ending = reports[-1] if reports else {}
    if "exit" in ending:
        return Ending(int(ending["exit"]))
    if "signal" in ending:
        return Ending(-int(ending["signal"]))
    return Ending(None)  # killed before its main process ended (a timeout, a cancel)


def _raise_failure(report: dict[str, object], spec: RunSpec) -> None:
    if "exec" in report:
        raise _exec_error(int(str(report["exec"])), spec)
    if "chdir" in report:
        raise GateError(f"workdir is not a directory: {spec.workdir}", kind=ErrorKind.CONFIG)
    if "setup" in report:
        raise GateError(f"cannot give run {spec.name} its own namespaces and working copy:"
                        f" {report['setup']}", kind=ErrorKind.OUTPUT_DIR)


def _exec_error(code: int, spec: RunSpec) -> GateError:
    program = spec.argv[0]
    if code == errno.ENOENT:
        return GateError(f"command not found: {program} (run {spec.name}, in {spec.workdir})",
                         kind=ErrorKind.COMMAND_NOT_FOUND)
    return GateError(f"command is not executable: {program} (run {spec.name})",
                     kind=ErrorKind.COMMAND_NOT_FOUND)
