"""A slot's folders on the host: their layout, owners and modes made (and only what had to
change said), the engine's state emptied, and a folder wiped without following links."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from repro_gate.runner.slot_folders import Owner, SlotFolders, wipe
from repro_gate.runner.slots import Slot

SLOT = Slot(3, "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b", "NVIDIA H100 80GB HBM3")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the work root is root's (chown)")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_layout_under_the_work_root(tmp_path: Path) -> None:
    folders = SlotFolders.under(tmp_path, SLOT)

    assert folders.base == tmp_path / "slot3"
    assert (folders.work, folders.status) == (folders.base / "work", folders.base / "status")
    assert folders.proxy_socket == folders.base / "proxy" / "docker.sock"
    assert folders.engine_socket == folders.base / "engine" / "run" / "docker.sock"
    assert (folders.engine_data, folders.engine_exec, folders.engine_log) == (
        folders.engine / "data", folders.engine / "exec", folders.engine / "engine.log")


@needs_root
def test_create_makes_each_folder_with_its_mode_then_has_nothing_to_change(
    tmp_path: Path,
) -> None:
    folders = SlotFolders.under(tmp_path / "root", SLOT)
    owner = Owner(os.getuid(), os.getgid())

    changes = folders.create(owner)
    again = folders.create(owner)

    assert changes[0] == f"created {tmp_path / 'root'}"
    assert f"created {folders.base} (owner {owner.uid}:{owner.gid}, mode 0700)" in changes
    assert mode(tmp_path / "root") == 0o711
    assert [mode(folders.base), mode(folders.work), mode(folders.status)] == [0o700, 0o777, 0o777]
    assert [mode(folders.proxy_socket.parent), mode(folders.engine_data)] == [0o700, 0o700]
    assert again == []


@needs_root
def test_a_wrong_mode_is_set_back_and_said_and_the_shared_engine_gets_no_engine_folder(
    tmp_path: Path,
) -> None:
    folders = SlotFolders.under(tmp_path, SLOT)
    owner = Owner(os.getuid(), os.getgid())
    folders.create(owner, engine=False)
    folders.work.chmod(0o755)

    changes = folders.create(owner, engine=False)

    assert changes == [f"{folders.work}: mode set to 0777"]
    assert mode(folders.work) == 0o777
    assert not folders.engine.exists()


def test_resetting_the_engine_state_empties_exec_and_run_only(tmp_path: Path) -> None:
    folders = SlotFolders(tmp_path / "slot0")
    for folder in (folders.engine_exec, folders.engine_runtime, folders.engine_data):
        folder.mkdir(parents=True)
        (folder / "left-by-a-killed-engine").write_text("lock")

    folders.reset_engine_state(Owner(os.getuid(), os.getgid()))

    assert list(folders.engine_exec.iterdir()) == list(folders.engine_runtime.iterdir()) == []
    assert mode(folders.engine_exec) == mode(folders.engine_runtime) == 0o700
    assert (folders.engine_data / "left-by-a-killed-engine").exists()


def test_wipe_removes_everything_inside_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("not the job's")
    work = tmp_path / "work"
    (work / "checkout" / ".git").mkdir(parents=True)
    (work / "result.bin").write_bytes(b"\0")
    (work / "link").symlink_to(outside)

    wipe(work)

    assert list(work.iterdir()) == []
    assert (outside / "kept.txt").read_text() == "not the job's"
