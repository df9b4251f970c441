"""Each run's own copy of the working directory: what is copied, what the run wrote, and the
probe's paths named as the user's files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.file_lock import OUTPUT_LOCK, WORKDIR_LOCK_DIR
from repro_gate.gate.workcopy import foreign_entry, gate_folders, is_gate_file, make
from repro_gate.probe import PROBE_SUBDIR


def project(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory with code, a git directory and the gate's own files in it."""
    workdir = tmp_path / "project"
    (workdir / "src").mkdir(parents=True)
    (workdir / "train.py").write_text("print('train')\n")
    (workdir / "src" / "model.py").write_text("MODEL = 1\n")
    (workdir / ".git").mkdir()
    (workdir / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (workdir / WORKDIR_LOCK_DIR).mkdir()
    (workdir / WORKDIR_LOCK_DIR / "lock").write_text("123\n")
    output_dir = workdir / "repro-gate-out"
    (output_dir / "runs").mkdir(parents=True)
    (workdir / "other-out").mkdir()
    (workdir / "other-out" / OUTPUT_LOCK).write_text("456\n")
    return workdir, output_dir


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def test_the_copy_holds_everything_but_the_gates_own_files(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)

    copy = make(workdir, output_dir / "runs" / "A" / "work", output_dir)

    assert files_under(copy.path) == {"train.py", "src/model.py", ".git/HEAD"}
    assert copy.source == workdir
    assert copy.written() == set()  # nothing written yet: every entry is as copied


def test_a_relative_link_out_of_the_workdir_becomes_absolute(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    (tmp_path / "data.csv").write_text("1,2\n")
    os.symlink("../data.csv", workdir / "data.csv")
    os.symlink("train.py", workdir / "alias.py")

    copy = make(workdir, tmp_path / "copy", output_dir)

    assert os.readlink(copy.path / "data.csv") == str(tmp_path / "data.csv")
    assert os.readlink(copy.path / "alias.py") == "train.py"
    assert (copy.path / "data.csv").read_text() == "1,2\n"


def test_only_what_the_run_wrote_is_kept(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    copy = make(workdir, tmp_path / "copy", output_dir)
    (copy.path / "checkpoints").mkdir()
    (copy.path / "checkpoints" / "last.pt").write_bytes(b"weights")
    (copy.path / "train.py").write_text("print('changed by the run')\n")

    assert copy.written() == {"checkpoints/last.pt", "train.py"}
    copy.keep_only_written()

    assert files_under(copy.path) == {"checkpoints/last.pt", "train.py"}
    assert not (copy.path / "src").exists()  # left empty, so removed
    assert (workdir / "src" / "model.py").read_text() == "MODEL = 1\n"  # the user's untouched


def test_a_file_the_run_replaced_by_a_link_counts_as_written(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    copy = make(workdir, tmp_path / "copy", output_dir)
    (copy.path / "train.py").unlink()
    os.symlink("src/model.py", copy.path / "train.py")

    assert copy.written() == {"train.py"}


def test_probe_paths_into_the_copy_name_the_users_files(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    copy = make(workdir, tmp_path / "copy", output_dir)
    probe_dir = tmp_path / "run" / PROBE_SUBDIR
    probe_dir.mkdir(parents=True)
    alerts = [{"op": "aten::index_add_", "file": f"{copy.path}/train.py", "line": 3},
              {"op": "other", "file": f"{copy.path}-elsewhere/x.py"}]
    (probe_dir / "alerts.json").write_text(json.dumps(alerts))
    (probe_dir / "trajectory.jsonl").write_text(json.dumps({"file": f"{copy.path}/a.py"}))

    copy.name_workspace_files(probe_dir.parent)

    rewritten = json.loads((probe_dir / "alerts.json").read_text())
    assert rewritten[0]["file"] == f"{workdir}/train.py"
    assert rewritten[1]["file"] == f"{copy.path}-elsewhere/x.py"  # another directory's name
    assert str(copy.path) in (probe_dir / "trajectory.jsonl").read_text()  # JSON files only


def test_a_probe_folder_that_is_a_link_is_run_tampered_and_its_target_is_left_alone(
    tmp_path: Path,
) -> None:
    workdir, output_dir = project(tmp_path)
    copy = make(workdir, tmp_path / "copy", output_dir)
    elsewhere = tmp_path / "host-folder"
    elsewhere.mkdir()
    (elsewhere / "settings.json").write_text(json.dumps({"file": f"{copy.path}/x.py"}))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.symlink(elsewhere, run_dir / PROBE_SUBDIR)

    with pytest.raises(GateError) as raised:
        copy.name_workspace_files(run_dir)

    assert raised.value.kind == ErrorKind.RUN_TAMPERED
    assert str(run_dir / PROBE_SUBDIR) in raised.value.message
    assert str(copy.path) in (elsewhere / "settings.json").read_text()


def test_every_gate_folder_of_the_workdir_is_found_at_any_depth(tmp_path: Path) -> None:
    workdir, _ = project(tmp_path)
    nested = workdir / "experiments" / "old-out"
    nested.mkdir(parents=True)
    (nested / OUTPUT_LOCK).write_text("789\n")
    elsewhere = tmp_path / "out-elsewhere"

    found = gate_folders(workdir, elsewhere)

    assert set(found) == {elsewhere, workdir / WORKDIR_LOCK_DIR, workdir / "other-out", nested}


def test_a_workdir_that_is_not_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(GateError) as raised:
        make(tmp_path / "absent", tmp_path / "copy", tmp_path / "out")

    assert raised.value.kind is ErrorKind.CONFIG
    assert raised.value.message == f"workdir is not a directory: {tmp_path / 'absent'}"


def test_a_target_that_exists_is_an_output_dir_error(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    (tmp_path / "copy").mkdir()

    with pytest.raises(GateError) as raised:
        make(workdir, tmp_path / "copy", output_dir)

    assert raised.value.kind is ErrorKind.OUTPUT_DIR
    assert raised.value.message.startswith("cannot copy the working directory into")


def test_gate_files_are_the_lock_directory_and_marked_output_directories(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)

    assert is_gate_file(workdir / WORKDIR_LOCK_DIR, output_dir)
    assert is_gate_file(output_dir, output_dir.resolve())
    assert is_gate_file(workdir / "other-out", output_dir)
    assert not is_gate_file(workdir / "src", output_dir)
    assert not is_gate_file(workdir / "train.py", output_dir)


def test_virtualenvs_and_data_paths_are_linked_not_copied(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    (workdir / ".venv" / "lib").mkdir(parents=True)
    (workdir / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workdir / ".venv" / "lib" / "torch.so").write_bytes(b"big")
    (workdir / "data" / "set").mkdir(parents=True)
    (workdir / "data" / "set" / "train.bin").write_bytes(b"samples")
    (workdir / "data" / "notes.txt").write_text("copied\n")

    copy = make(workdir, tmp_path / "copy", output_dir, linked=(Path("data/set"),))

    assert (copy.path / ".venv").readlink() == workdir.resolve() / ".venv"
    assert (copy.path / "data" / "set").readlink() == workdir.resolve() / "data" / "set"
    assert not (copy.path / "data").is_symlink()
    assert (copy.path / "data" / "set" / "train.bin").read_bytes() == b"samples"
    assert copy.written() == set()  # the copy's own links are not what the run wrote
    copy.keep_only_written()
    assert list(copy.path.iterdir()) == []


def test_for_a_container_virtualenvs_and_data_paths_are_empty_mount_points(
    tmp_path: Path,
) -> None:
    workdir, output_dir = project(tmp_path)
    (workdir / ".venv").mkdir()
    (workdir / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workdir / "data").mkdir()
    (workdir / "data" / "set.bin").write_bytes(b"samples")
    (workdir / "data" / "notes.txt").write_text("copied\n")

    copy = make(workdir, tmp_path / "copy", output_dir, linked=(Path("data/set.bin"),),
                mount_points=True)

    assert copy.shared == (workdir / ".venv", workdir / "data" / "set.bin")
    assert list((copy.path / ".venv").iterdir()) == []
    assert (copy.path / "data" / "set.bin").read_bytes() == b""
    assert (copy.path / "data" / "notes.txt").read_text() == "copied\n"
    (copy.path / "model.pt").write_bytes(b"weights")
    assert copy.move_to(tmp_path / "moved").written() == {"model.pt"}  # not the mount points


def test_a_copy_moves_to_its_run_directory_with_what_the_run_wrote(tmp_path: Path) -> None:
    workdir, output_dir = project(tmp_path)
    copy = make(workdir, output_dir / "work", output_dir)
    (copy.path / "model.pt").write_bytes(b"weights")
    copy.keep_only_written()

    moved = copy.move_to(output_dir / "runs" / "A")

    assert files_under(moved.path) == {"model.pt"}
    assert not (output_dir / "work").exists()


def test_an_entry_of_another_owner_is_found_and_the_gates_folders_are_not_looked_at(
    tmp_path: Path,
) -> None:
    workdir, output_dir = project(tmp_path)
    uid, gid = os.geteuid(), os.getegid()
    (output_dir / "runs" / "old.txt").write_text("")
    (workdir / "other-out" / "x.txt").write_text("")

    assert foreign_entry(workdir, output_dir.resolve(), uid, gid) is None
    if uid == 0:  # only root can give a file away
        os.chown(output_dir / "runs" / "old.txt", 12345, 12345)
        os.chown(workdir / "other-out" / "x.txt", 12345, 12345)
        assert foreign_entry(workdir, output_dir.resolve(), uid, gid) is None
        os.chown(workdir / "src" / "model.py", uid, 12345)  # another group is enough
        assert foreign_entry(workdir, output_dir.resolve(), uid, gid) == (
            workdir / "src" / "model.py")
    assert foreign_entry(workdir, output_dir.resolve(), uid + 1, gid) is not None
