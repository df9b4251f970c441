"""A run's processes, found from outside its PID namespace.

A training's `os.getpid()` is its PID inside the run's own namespace (2, 3, …), which names
another process on the host; the tests mark the gate's environment instead, and every process
of the run inherits the mark.
"""

from __future__ import annotations

import time
from pathlib import Path

MARK = "REPRO_GATE_TEST_MARK"


def alive(pid: int) -> bool:
    """True for a process that exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def marked(value: str) -> list[int]:
    """PIDs of the live processes whose environment holds MARK=value."""
    wanted = f"{MARK}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def survivors(value: str, settle: float = 1.0) -> list[int]:
    """The marked processes still running after `settle` seconds at most (a SIGKILL takes the
    kernel a moment)."""
    deadline = time.monotonic() + settle
    while marked(value) and time.monotonic() < deadline:
        time.sleep(0.05)
    return marked(value)
