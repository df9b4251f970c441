"""What a training container sees of the gate's files, and as which user (mount lists computed
from paths; no daemon)."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import PythonEnvironment, RunSpec
from repro_gate.launch.docker_mounts import (
    CONTAINER_PYTHON_PATH,
    NOBODY,
    bind,
    container_argv_item,
    default_user,
    make_writable_for,
    run_mounts,
    working_directory,
)
from repro_gate.launch.host_paths import PathTranslator

ON_HOST = PathTranslator(None)


def spec(tmp_path: Path, **extra: Any) -> RunSpec:
    base = RunSpec("A", "deterministic", ["python", "train.py"], tmp_path / "out" / "A" / "work",
                   tmp_path / "out" / "A", {}, None, tmp_path / "out" / "A.log",
                   [tmp_path / "probe" / "inject"], workspace=tmp_path / "ws")
    return dataclasses.replace(base, **extra)


def summary(mounts: list[Any]) -> list[tuple[str, str, str, bool]]:
    return [(m["Target"], m["Source"], m["Type"], m["ReadOnly"]) for m in mounts]


def test_the_copy_is_seen_at_the_workspaces_path_with_its_virtualenvs_and_data_read_only(
    tmp_path: Path,
) -> None:
    ws, run_dir, work = tmp_path / "ws", tmp_path / "out" / "A", tmp_path / "out" / "A" / "work"
    run = spec(tmp_path, shared=(ws / ".venv", ws / "data" / "set"),
               python_environment=PythonEnvironment(Path("/opt/env"), volume="repro-gate-env-1"))

    mounts = run_mounts(run, tmp_path / "staging", ON_HOST)

    assert summary(mounts.mounts) == [
        (str(ws), str(work), "bind", False),
        (str(ws / ".venv"), str(ws / ".venv"), "bind", True),
        (str(ws / "data" / "set"), str(ws / "data" / "set"), "bind", True),
        (str(run_dir), str(run_dir), "bind", False),
        ("/opt/env", "repro-gate-env-1", "volume", True),
        (f"{CONTAINER_PYTHON_PATH}/0", str(tmp_path / "probe" / "inject"), "bind", True),
    ]
    assert mounts.python_path == [f"{CONTAINER_PYTHON_PATH}/0"]
    assert working_directory(run) == ws


def test_a_run_that_sees_its_copy_elsewhere_keeps_the_workspace_read_only(tmp_path: Path) -> None:
    ws, work, moved = tmp_path / "ws", tmp_path / "out" / "A" / "work", tmp_path / "moved-ws"
    run = spec(tmp_path, shared=(ws / ".venv",), workspace_at=moved, python_path=[])

    mounts = run_mounts(run, tmp_path / "staging", ON_HOST)

    assert summary(mounts.mounts)[:3] == [
        (str(ws), str(ws), "bind", True),
        (str(moved), str(work), "bind", False),
        (str(moved / ".venv"), str(ws / ".venv"), "bind", True),
    ]
    assert working_directory(run) == moved


def test_the_gates_folders_in_the_workspace_are_masked_before_the_runs_own_are_shown(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    output, lock, other = ws / "repro-gate-out", ws / ".repro-gate-workdir", ws / "old" / "out"
    run_dir = output / "runs" / "B"
    run = spec(tmp_path, workdir=output / "work", run_dir=run_dir, python_path=[],
               hidden=(output, lock, other, output / "upgrade" / "baseline",
                       tmp_path / "elsewhere"))

    mounts = run_mounts(run, tmp_path / "staging", ON_HOST)

    assert summary(mounts.mounts) == [
        (str(ws), str(output / "work"), "bind", False),
        (str(lock), None, "tmpfs", True),
        (str(other), None, "tmpfs", True),
        (str(output), None, "tmpfs", True),
        (str(run_dir), str(run_dir), "bind", False),
    ]


def test_without_a_working_copy_the_workdir_is_the_read_only_workspace(tmp_path: Path) -> None:
    run = spec(tmp_path, workspace=None, workdir=tmp_path / "ws", python_path=[])

    mounts = run_mounts(run, tmp_path / "staging", ON_HOST)

    assert [m["Target"] for m in mounts.mounts] == [str(tmp_path / "ws"),
                                                   str(tmp_path / "out" / "A")]


def test_probe_folders_the_host_cannot_see_are_copied_where_it_can(tmp_path: Path) -> None:
    inject = tmp_path / "site" / "inject"
    (inject / "__pycache__").mkdir(parents=True)
    (inject / "sitecustomize.py").write_text("# probe\n", encoding="utf-8")
    (inject / "__pycache__" / "x.pyc").write_bytes(b"")
    staging = tmp_path / "out" / ".A.python-path"
    translator = PathTranslator([(str(tmp_path / "out"), "/host/out"),
                                 (str(tmp_path / "ws"), "/host/ws")])

    mounts = run_mounts(spec(tmp_path, python_path=[inject]), staging, translator)

    assert (staging / "0" / "sitecustomize.py").is_file()
    assert not (staging / "0" / "__pycache__").exists()
    assert summary(mounts.mounts)[-1] == (f"{CONTAINER_PYTHON_PATH}/0",
                                          "/host/out/.A.python-path/0", "bind", True)
    assert summary(mounts.mounts)[0][:2] == (str(tmp_path / "ws"), "/host/out/A/work")


def test_a_path_the_docker_host_cannot_see_is_a_docker_error(tmp_path: Path) -> None:
    translator = PathTranslator([("/github/workspace", "/home/runner/work")])

    with pytest.raises(GateError) as raised:
        bind(translator, tmp_path / "elsewhere", "/x", read_only=True)

    assert raised.value.kind == ErrorKind.DOCKER
    assert "is not on a volume the Docker host can see" in raised.value.message


def test_arguments_naming_probe_files_name_them_where_they_are_mounted(tmp_path: Path) -> None:
    run = spec(tmp_path, python_path=[tmp_path / "probe" / "inject", tmp_path / "reference"])
    mounted = [f"{CONTAINER_PYTHON_PATH}/0", f"{CONTAINER_PYTHON_PATH}/1"]

    assert container_argv_item(str(tmp_path / "reference" / "train.py"), run, mounted) == (
        f"{CONTAINER_PYTHON_PATH}/1/train.py")
    assert container_argv_item("--epochs", run, mounted) == "--epochs"
    assert container_argv_item(str(tmp_path / "ws" / "t.py"), run, mounted) == str(
        tmp_path / "ws" / "t.py")


def test_the_training_runs_as_the_workspace_owner_never_as_root(tmp_path: Path) -> None:
    owned = tmp_path / "owned"
    owned.mkdir()
    info = owned.stat()

    expected = NOBODY if info.st_uid == 0 else f"{info.st_uid}:{info.st_gid}"
    assert default_user(owned) == expected
    assert default_user(tmp_path / "missing") == NOBODY


def test_a_user_name_opens_the_run_directory_up_for_writing(tmp_path: Path) -> None:
    run_dir = tmp_path / "A"
    (run_dir / "work").mkdir(parents=True)
    (run_dir / "work" / "train.py").write_text("x\n", encoding="utf-8")
    (run_dir / "work").chmod(0o755)
    (run_dir / "work" / "train.py").chmod(0o644)

    make_writable_for(run_dir, "trainer")

    assert stat.S_IMODE((run_dir / "work").stat().st_mode) == 0o777
    assert stat.S_IMODE((run_dir / "work" / "train.py").stat().st_mode) == 0o666


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_a_numeric_user_is_given_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "A"
    (run_dir / "work").mkdir(parents=True)
    (run_dir / "work" / "model.pt").write_bytes(b"")

    make_writable_for(run_dir, "1000:1001")

    for path in (run_dir, run_dir / "work", run_dir / "work" / "model.pt"):
        assert (path.stat().st_uid, path.stat().st_gid) == (1000, 1001)
    assert default_user(run_dir) == "1000:1001"  # and the next run runs as that owner
