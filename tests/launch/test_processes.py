"""Finding and stopping every process of a local run, those that left its session included
(tiny children of this interpreter; the gate is their subreaper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from repro_gate.launch.processes import (
    RunProcesses,
    become_subreaper,
    children_by_parent,
    descendants,
)

# Starts a `sleep` in a session of its own, prints its PID and exits: the sleep is orphaned.
ORPHANING = ("import subprocess, sys\n"
             "p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
             "print(p.pid, flush=True)\n")
# Ignores SIGTERM, says so, and waits.
STUBBORN = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_descendants_walk_the_tree_once_even_through_a_cycle() -> None:
    children = {1: [2, 3], 2: [4], 4: [2], 9: [10]}

    found = descendants([1], children)

    assert found[0] == 1 and sorted(found) == [1, 2, 3, 4]
    assert descendants([7], children) == [7]


def test_this_process_is_listed_under_its_parent() -> None:
    assert os.getpid() in children_by_parent()[os.getppid()]


def test_an_orphan_that_left_the_session_is_found_and_killed() -> None:
    assert become_subreaper()
    tree = RunProcesses()
    tree.process = subprocess.Popen([sys.executable, "-c", ORPHANING], stdout=subprocess.PIPE,
                                    start_new_session=True)
    assert tree.process.stdout is not None
    orphan = int(tree.process.stdout.readline())
    tree.process.wait(timeout=10)
    tree.process.stdout.close()

    assert orphan in tree.members()
    tree.kill_all()

    assert not alive(orphan)
    assert orphan not in tree.members()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    tree = RunProcesses()
    tree.process = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE,
                                    start_new_session=True)
    assert tree.process.stdout is not None
    assert tree.process.stdout.readline() == b"ready\n"

    tree.stop(grace=0.2)

    assert tree.process.returncode == -signal.SIGKILL
    tree.process.stdout.close()
    assert tree.members() == []


def test_children_from_before_the_run_are_not_the_runs() -> None:
    earlier = subprocess.Popen(["sleep", "30"])
    try:
        assert earlier.pid not in RunProcesses().members()
    finally:
        earlier.kill()
        earlier.wait()
