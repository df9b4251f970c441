"""Local runs in their own namespaces: the workspace seen through an overlay at its own path,
the gate's folders hidden, and no process of a run left to write once it ended. Real runs of
tiny Python scripts under the real init (the kernel must allow user namespaces)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.file_lock import WORKDIR_LOCK_DIR
from repro_gate.gate.workcopy import Layer
from repro_gate.launch import namespaces
from repro_gate.launch.base import Isolation, RunSpec
from repro_gate.launch.local import LocalLauncher

pytestmark = pytest.mark.skipif(namespaces.refusal(Path("/tmp")) is not None,
                                reason="the kernel refuses user namespaces or overlayfs here")


def project(tmp_path: Path) -> Path:
    """A workspace inside a git repository, with the gate's output folder inside it."""
    workspace = tmp_path / "repo" / "project"
    (workspace / "sub").mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    (workspace / "sub" / "c.txt").write_text("c\n")
    (workspace / WORKDIR_LOCK_DIR).mkdir()
    (workspace / WORKDIR_LOCK_DIR / "lock").write_text("1\n")
    return workspace


def spec(workspace: Path, name: str, code: str, timeout: float = 30.0,
         masked: tuple[Path, ...] = ()) -> RunSpec:
    output = workspace / "repro-gate-out"
    run_dir = output / "runs" / name
    upper, scratch = run_dir / "work", run_dir / ".overlay-work"
    upper.mkdir(parents=True)
    scratch.mkdir()
    return RunSpec(name, "deterministic", [sys.executable, "-c", code], workspace, run_dir, {},
                   timeout, output / "logs" / f"{name}.log", [], workspace=workspace,
                   isolation=Isolation(upper, scratch),
                   hidden=masked or (output, workspace / WORKDIR_LOCK_DIR))


def run(run_spec: RunSpec) -> tuple[int | None, list[str]]:
    lines: list[str] = []
    outcome = LocalLauncher().run(run_spec, lines.append)
    return outcome.exit_code, lines


def tree(root: Path) -> dict[str, str]:
    """The user's files under `root` (the gate's output folder left out)."""
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and "repro-gate-out" not in p.parts}


def test_writes_overwrites_and_deletes_land_in_the_upper_layer_only(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    before = tree(workspace)
    code = ("import os, pathlib\n"
            "print(os.getcwd())\n"
            "pathlib.Path('a.txt').write_text('changed\\n')\n"
            "pathlib.Path('sub/new.txt').write_text('new\\n')\n"
            "os.remove('b.txt')\n"
            "try:\n"
            "    pathlib.Path('../escape.txt').write_text('x')\n"
            "except OSError as error:\n"
            "    print('refused', error.errno)\n")
    run_spec = spec(workspace, "A", code)

    exit_code, lines = run(run_spec)

    assert exit_code == 0, lines
    assert lines == [str(workspace), "refused 30"]  # its own path; EROFS above it
    assert tree(workspace) == before
    assert not (tmp_path / "repo" / "escape.txt").exists()
    layer = Layer(run_spec.isolation.upper if run_spec.isolation else tmp_path)
    assert layer.written() == {"a.txt", "sub/new.txt"}
    assert layer.deleted() == {"b.txt"}
    assert (layer.path / "a.txt").read_text() == "changed\n"


def test_two_runs_never_see_each_others_files_or_folders(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    code = ("import os, pathlib\n"
            "run_dir = pathlib.Path(os.environ['REPRO_GATE_RUN_DIR'])\n"
            "(run_dir / 'mine.txt').write_text(os.environ['NAME'])\n"
            "pathlib.Path('model.pt').write_text(os.environ['NAME'])\n"
            "print(sorted(os.listdir(run_dir.parent)), os.path.exists('model.pt.old'),\n"
            "      os.listdir('" + WORKDIR_LOCK_DIR + "'), os.listdir(run_dir / 'work'))\n"
            "os.rename('model.pt', 'model.pt.old') if os.environ['NAME'] == 'A' else None\n")
    first, second = spec(workspace, "A", code), spec(workspace, "B", code)
    first.env["NAME"], second.env["NAME"] = "A", "B"

    assert run(first) == (0, ["['A'] False [] []"])
    assert run(second) == (0, ["['B'] False [] []"])

    assert (first.run_dir / "mine.txt").read_text() == "A"
    assert (second.run_dir / "mine.txt").read_text() == "B"
    assert Layer(second.run_dir / "work").written() == {"model.pt"}


def test_a_run_may_have_its_own_host_name(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    run_spec = spec(workspace, "V-hostname", "import socket; print(socket.gethostname())")
    assert run_spec.isolation is not None
    run_spec.hostname = "elsewhere"

    assert run(run_spec) == (0, ["elsewhere"])
    assert run(spec(workspace, "A", "import socket; print(socket.gethostname())")) == (
        0, [socket.gethostname()])


def test_a_run_may_see_the_workspace_at_another_path_its_own_only_read(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    before = tree(workspace)
    code = ("import os, pathlib\n"
            "print(os.getcwd())\n"
            "pathlib.Path('a.txt').write_text('changed\\n')\n"
            "print(sorted(os.listdir('repro-gate-out')), os.path.exists('sub/c.txt'))\n"
            "try:\n"
            "    pathlib.Path(os.environ['WORKSPACE'], 'b.txt').write_text('x')\n"
            "except OSError as error:\n"
            "    print('refused', error.errno)\n")
    run_spec = spec(workspace, "V-path", code)
    moved = run_spec.run_dir / "moved" / "project"
    moved.mkdir(parents=True)
    assert run_spec.isolation is not None
    run_spec.workspace_at = moved
    run_spec.env["WORKSPACE"] = str(workspace)

    exit_code, lines = run(run_spec)

    assert exit_code == 0, lines
    assert lines == [str(moved), "[] True", "refused 30"]  # the gate's folders masked there too
    assert tree(workspace) == before
    assert Layer(run_spec.isolation.upper).written() == {"a.txt"}


def test_a_setsid_grandchild_never_writes_after_the_run(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    late = ("import os, pathlib, time\n"
            "time.sleep(1.0)\n"
            "(pathlib.Path(os.environ['REPRO_GATE_RUN_DIR']) / 'late.txt').write_text('late')\n")
    code = ("import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', {late!r}], start_new_session=True)\n"
            "print('started')\n")
    run_spec = spec(workspace, "A", code)

    assert run(run_spec) == (0, ["started"])
    time.sleep(2.0)

    assert not (run_spec.run_dir / "late.txt").exists()


def test_the_init_forwards_sigterm_at_the_timeout(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: (print('terminated', flush=True),"
            " sys.exit(5)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")
    started = time.monotonic()

    # Long enough for the handler to be set on a busy machine: the timeout cannot wait for it.
    exit_code, lines = run(spec(workspace, "A", code, timeout=4.0))

    assert exit_code is None
    # The gate signals every process it finds too: the handler may run twice.
    assert lines[0] == "ready" and lines[1].startswith("terminated"), lines
    assert time.monotonic() - started < 15


def test_a_signal_and_an_exit_code_reach_the_gate_as_for_a_bare_run(tmp_path: Path) -> None:
    workspace = project(tmp_path)

    assert run(spec(workspace, "A", "import sys; sys.exit(3)"))[0] == 3
    assert run(spec(workspace, "B", "import os; os.kill(os.getpid(), 9)"))[0] == -9


def test_a_missing_program_is_a_command_not_found_error(tmp_path: Path) -> None:
    run_spec = spec(project(tmp_path), "A", "")
    run_spec.argv = ["no-such-program-xyz", "train.py"]

    with pytest.raises(GateError) as raised:
        run(run_spec)

    assert raised.value.kind == ErrorKind.COMMAND_NOT_FOUND
    assert raised.value.message == (
        f"command not found: no-such-program-xyz (run A, in {run_spec.workdir})")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may own a file as another user")
def test_a_file_of_another_owner_is_copied_up(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    os.chown(workspace / "a.txt", 12345, 12345)
    run_spec = spec(workspace, "A", "open('a.txt', 'a').write('more\\n')")

    assert run(run_spec) == (0, [])

    assert (workspace / "a.txt").read_text() == "a\n"
    assert (run_spec.run_dir / "work" / "a.txt").read_text() == "a\nmore\n"


def test_the_switch_turns_namespaces_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")

    assert namespaces.refusal(tmp_path) == "REPRO_GATE_NAMESPACES=off"
    assert not LocalLauncher().isolates(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a nosuid tmpfs for the test needs root")
def test_read_only_binds_keep_the_locked_flags_of_their_mount(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev", "tmpfs", str(locked)],
                   check=True)
    try:
        workspace = project(locked)
        shown = workspace / "repro-gate-out" / "inject"
        shown.mkdir(parents=True)
        (shown / "probe.py").write_text("{}\n")
        run_spec = spec(workspace, "B", f"path = {str(shown)!r}\n"
                        "print(open(path + '/probe.py').read().strip())\n"
                        "try:\n    open(path + '/x', 'w')\n"
                        "except OSError as error:\n    print('refused', error.errno)\n")
        run_spec.python_path = [shown]

        assert run(run_spec) == (0, ["{}", "refused 30"])
    finally:
        subprocess.run(["umount", "-l", str(locked)], check=False)


def test_a_gate_folder_inside_another_is_hidden_by_the_outer_mask(tmp_path: Path) -> None:
    workspace = project(tmp_path)
    inner = workspace / "repro-gate-out" / "upgrade" / "baseline"
    inner.mkdir(parents=True)
    run_spec = spec(workspace, "A", "import os; print(os.listdir('repro-gate-out'))",
                    masked=(inner, workspace / "repro-gate-out"))

    assert run(run_spec) == (0, ["['runs']"])
    assert namespaces.outermost([inner, workspace / "repro-gate-out", inner]) == (
        workspace / "repro-gate-out",)


def test_only_a_repository_above_the_workspace_is_made_read_only(tmp_path: Path) -> None:
    workspace = project(tmp_path)

    assert namespaces.repository_root(workspace) == tmp_path / "repo"
    (workspace / ".git").mkdir()
    assert namespaces.repository_root(workspace) is None  # the workspace is the repository
    assert namespaces.repository_root(tmp_path / "elsewhere") is None
