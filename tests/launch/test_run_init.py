"""The run's init as a program, started as an unprivileged user: the training runs under its
own uid, never as root, and sees the workspace through its overlay. Needs root to drop to
`nobody`, and a system Python that user may run (the init imports the standard library only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from repro_gate.launch import namespaces

NOBODY = 65534
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None
    or namespaces.refusal(Path("/tmp")) is not None,
    reason="needs root (to become nobody), /usr/bin/python3 and user namespaces")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder `nobody` owns (pytest's own are root's, mode 700)."""
    folder = Path(tempfile.mkdtemp(prefix="repro-gate-init-", dir="/tmp"))
    os.chown(folder, NOBODY, NOBODY)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def test_an_unprivileged_gate_runs_the_training_as_itself(shared: Path) -> None:
    workspace, run_dir = shared / "project", shared / "project" / "out" / "runs" / "A"
    for folder in (run_dir / "work", run_dir / ".overlay-work"):
        folder.mkdir(parents=True)
    (workspace / "a.txt").write_text("a\n")
    init = shared / "run_init.py"
    shutil.copy(namespaces.INIT, init)
    for path in [shared, *shared.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    code = ("import os; open('a.txt', 'a').write('b\\n');"
            " print(os.getuid(), os.getgid(), os.getpid(), os.getcwd())")
    plan = {"argv": [str(SYSTEM_PYTHON), "-c", code], "cwd": str(workspace),
            "lower": str(workspace), "upper": str(run_dir / "work"),
            "scratch": str(run_dir / ".overlay-work"), "read_only": [],
            "masks": [str(workspace / "out")], "binds": [[str(run_dir), True]],
            "hidden": [str(run_dir / "work"), str(run_dir / ".overlay-work")]}
    reader, writer = os.pipe()

    done = subprocess.run([str(SYSTEM_PYTHON), "-I", "-S", str(init), json.dumps(plan),
                           str(writer)], pass_fds=(writer,), preexec_fn=as_nobody,
                          capture_output=True, text=True, timeout=60, check=False)
    os.close(writer)
    with os.fdopen(reader) as report:
        reports = report.read().splitlines()

    assert (done.returncode, reports) == (0, ['{"exit": 0}']), done.stdout + done.stderr
    assert done.stdout.split() == [str(NOBODY), str(NOBODY), "2", str(workspace)]
    assert (workspace / "a.txt").read_text() == "a\n"
    assert (run_dir / "work" / "a.txt").read_text() == "a\nb\n"
