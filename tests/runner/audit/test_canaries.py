"""What `runner audit` plants and watches: the secrets (root-only files, removed whatever
happens), which canary a piece of data reveals, and the loopback server's record of the URLs
asked for."""

from __future__ import annotations

import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from repro_gate.runner.audit.canaries import CANARY_FILE, Canaries, Loopback, OtherSlot, planted


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_each_canary_is_told_by_its_own_mark(tmp_path: Path) -> None:
    canaries = Canaries("c0ffee", tmp_path, tmp_path / "t", OtherSlot(None, None, None))

    assert [canaries.which(f"x c0ffee-{mark}\n".encode()) for mark in "htfc"] == [
        "host", "host /tmp", "other slot's file", "other slot's container"]
    assert canaries.which(b"c0ffee") is None
    assert canaries.which(b"CANARY=c0ffe-h") is None
    assert canaries.host_file == tmp_path / CANARY_FILE


def test_canaries_are_root_only_files_removed_on_the_way_out(tmp_path: Path) -> None:
    other_work = tmp_path / "other-work"
    other_work.mkdir()

    with planted(tmp_path / "root", "rg-audit-test-", "busybox", None, other_work,
                 "GPU-0") as canaries:
        files = [canaries.host_file, canaries.tmp_file, canaries.other.file]
        texts = [path.read_text() for path in files if path is not None]
        modes = [mode(path) for path in files if path is not None]
        folder_mode = mode(canaries.host_folder)

    assert [canaries.which(text.encode()) for text in texts] == [
        "host", "host /tmp", "other slot's file"]
    assert len({text.rpartition("-")[0] for text in texts}) == 1  # one secret, three marks
    assert modes == [0o600] * 3 and folder_mode == 0o700
    assert canaries.host_folder.parent == tmp_path / "root"
    assert canaries.tmp_file.parent == Path("/tmp")
    assert (canaries.other.container, canaries.other.container_name) == (None, None)
    assert not any(path.exists() for path in files if path is not None)
    assert not canaries.host_folder.exists()


def test_the_canaries_go_even_when_the_audit_fails(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), planted(tmp_path, "rg-audit-test-", "busybox", None,
                                              None, "GPU-0") as canaries:
        raise RuntimeError("an attempt failed")

    assert not canaries.tmp_file.exists() and not canaries.host_folder.exists()
    assert canaries.other.file is None


def test_the_loopback_server_records_each_path_asked_for() -> None:
    with Loopback() as loopback:
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(loopback.url("token-1"), timeout=5)
        hit = loopback.hit("token-1")
        missed = loopback.hit("token-2", seconds=0.1)

    assert answered.value.code == 404
    assert loopback.url("x").startswith("http://127.0.0.1:")
    assert (hit, missed) == (True, False)
    assert loopback.paths == ["/token-1"]
