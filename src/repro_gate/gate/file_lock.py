"""One gate at a time per output directory and per working directory.

Two gates sharing an output directory delete each other's run directories; two sharing a
working directory move each other's checkpoints. `hold` takes an advisory lock
(`fcntl.flock`) on both for the gate's lifetime: a second gate is refused with the holder's
pid, or waits with `--wait`.

Where the locks live, and why:
- In the locked directories themselves: `<output_dir>/.repro-gate.lock` and
  `<workdir>/.repro-gate-workdir/lock`. flock locks an inode, so the lock file must be on the
  filesystem both gates see. When the gate runs in the action's container with the workspace
  bind-mounted, a file in the workspace is the same inode inside and outside the container
  (one kernel), while /tmp or /run/lock would be a different directory on each side.
- The kernel releases a flock when the holder's descriptor closes, including when the gate is
  killed: no stale lock, nothing to clean up. The file stays and only records the pid of the
  last holder (a pid inside a container is that container's pid).
- The output directory's lock file also marks it as a gate's output directory: `gate.collect`
  never collects from such a directory below the working directory (another gate's runs), and
  never collects a file named like a lock file, so locks are never artifacts.
- git ignores them: the workdir's lock directory, and an output directory the gate creates,
  hold a `.gitignore` of `*`, so the gate leaves a clean checkout clean (`git status`), and the
  fingerprint leaves both out of its dirty check whatever they hold (`fingerprint.code`).
- A working directory the gate may not write (a read-only checkout) is locked through the
  directory itself (flock on a read-only descriptor); the holder's pid is then unknown.
- Locks are taken in the order of their paths, so two waiting gates cannot deadlock.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from repro_gate import notices
from repro_gate.config import Config
from repro_gate.errors import ErrorKind, GateError

OUTPUT_LOCK = ".repro-gate.lock"
WORKDIR_LOCK_DIR = ".repro-gate-workdir"
WORKDIR_LOCK = f"{WORKDIR_LOCK_DIR}/lock"
GITIGNORE = ".gitignore"
IGNORE_ALL = "# written by repro-gate: git ignores this directory\n*\n"
# The holder writes its pid just after locking; a refused gate may read in between.
PID_READ_TRIES = 20
PID_READ_PAUSE = 0.05


@contextmanager
def hold(config: Config, wait: bool) -> Iterator[None]:
    """Hold the locks of the output directory and the working directory while inside.

    Raises GateError(LOCKED) naming the holder when another gate holds one and `wait` is
    False; with `wait`, says once on stderr that it waits, and blocks until it is free.
    """
    descriptors = [(_output_descriptor(config.output_dir), config.output_dir)]
    workdir_fd = _workdir_descriptor(config.workdir)
    if workdir_fd is not None:
        descriptors.append((workdir_fd, config.workdir))
    with ExitStack() as stack:
        for fd, _ in descriptors:
            stack.callback(os.close, fd)
        for fd, directory in sorted(descriptors, key=lambda pair: str(pair[1])):
            _lock(fd, directory, wait)
            _record_pid(fd)
        yield


def gate_files(config: Config) -> list[Path]:
    """The gate's own files in the working tree: the lock directory and the output directory."""
    return [config.workdir / WORKDIR_LOCK_DIR, config.output_dir]


def _output_descriptor(output_dir: Path) -> int:
    """The lock file of the output directory, created with the directory."""
    try:
        _make_ignored_dir(output_dir)
        return os.open(output_dir / OUTPUT_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as error:
        reason = error.strerror or str(error)
        raise GateError(f"output directory {output_dir} is not writable: {reason}",
                        kind=ErrorKind.OUTPUT_DIR) from None


def _workdir_descriptor(workdir: Path) -> int | None:
    """The working directory's lock file, or the directory itself when it is read-only;
    None when it does not exist (the gate reports that when it starts the run)."""
    try:
        if workdir.is_dir():
            _make_ignored_dir(workdir / WORKDIR_LOCK_DIR)
        return os.open(workdir / WORKDIR_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        pass
    try:
        return os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None


def _make_ignored_dir(directory: Path) -> None:
    """Create `directory` (and its parents) with a `.gitignore` of `*` in it; one that exists
    already is left as it is (it may be the user's)."""
    if directory.is_dir():
        return
    directory.mkdir(parents=True, exist_ok=True)
    (directory / GITIGNORE).write_text(IGNORE_ALL, encoding="utf-8")


def _lock(fd: int, directory: Path, wait: bool) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        holder = _holder(fd)
    if not wait:
        raise GateError(
            f"another repro-gate ({holder}) is using {directory}; wait for it or pass --wait",
            kind=ErrorKind.LOCKED,
        )
    notices.say(f"waiting for another repro-gate ({holder}) using {directory}")
    fcntl.flock(fd, fcntl.LOCK_EX)


def _holder(fd: int) -> str:
    """`pid 1234` from the lock file, or `pid unknown` (a directory lock, or not yet written)."""
    for _ in range(PID_READ_TRIES):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        except OSError:  # a directory descriptor
            return "pid unknown"
        if text.isdigit():
            return f"pid {text}"
        time.sleep(PID_READ_PAUSE)
    return "pid unknown"


def _record_pid(fd: int) -> None:
    """Write our pid into the lock file (a directory lock has nowhere to write it)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass
