"""Every process a local run started, found and stopped, even those that left its session.

On Linux the gate is a child subreaper: a process orphaned by the training (a daemon that
double-forked, a child that called `setsid`) is re-parented to the gate instead of to PID 1, so
it can still be found, through /proc, and killed when the run ends.

A run in its own namespaces (launch/namespaces.py) needs none of this to end: its PID 1's exit
empties the namespace. The same pass still runs over it, for a run stopped from outside (a
timeout, a cancel), which kills its init and so the whole namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PROC = Path("/proc")
REAP_SECONDS = 3.0  # how long killed processes get to disappear


@functools.cache
def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux); False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children_by_parent() -> dict[int, list[int]]:
    """Every process on the machine, grouped by its parent's PID (from /proc/<pid>/stat)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if not entry.name.isdigit():
                continue
            try:
                stat = (PROC / entry.name / "stat").read_text()
            except OSError:
                continue  # it ended while we looked
            # The command name may hold spaces and parentheses: the fields follow the last ')'.
            fields = stat.rpartition(")")[2].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(roots: list[int], children: dict[int, list[int]]) -> list[int]:
    """The roots and every process below them."""
    found: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.append(pid)
            stack.extend(children.get(pid, []))
    return found


class RunProcesses:
    """The processes of one run: its main process, its group, and whatever it left behind."""

    def __init__(self) -> None:
        become_subreaper()
        self.gate = os.getpid()
        # The gate's own children from before the run are not the run's (a test's helpers…).
        self.before = set(children_by_parent().get(self.gate, []))
        self.process: subprocess.Popen[bytes] | None = None

    def members(self) -> list[int]:
        """PIDs of the run's processes still present (zombies included)."""
        children = children_by_parent()
        strays = [pid for pid in children.get(self.gate, []) if pid not in self.before]
        # A reaped main process's PID may be reused: it is a root only while not yet reaped.
        alive = self.process is not None and self.process.returncode is None
        roots = strays + ([self.process.pid] if alive and self.process else [])
        return descendants(roots, children)

    def signal_all(self, sig: signal.Signals) -> None:
        """Send `sig` to the run's process group and to every process of the run."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self, grace: float) -> None:
        """SIGTERM everything, give the main process `grace` seconds, then kill everything."""
        self.signal_all(signal.SIGTERM)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        self.kill_all()

    def kill_all(self) -> None:
        """SIGKILL every process of the run and reap those re-parented to the gate."""
        deadline = time.monotonic() + REAP_SECONDS
        while True:
            self.signal_all(signal.SIGKILL)
            if self.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            left = self._reap()
            if not left or time.monotonic() > deadline:
                return
            time.sleep(0.02)

    def _reap(self) -> list[int]:
        """Reap the gate's stray children that ended; the run's processes still there."""
        left = []
        for pid in self.members():
            if self.process is not None and pid == self.process.pid:
                if self.process.returncode is None:
                    left.append(pid)
                continue
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (yet): its parent reaps it, or we will
                done = 0
            if not done:
                left.append(pid)
        return left
