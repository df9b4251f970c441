"""One gate at a time per output and working directory: two holders of the same locks."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from repro_gate import notices
from repro_gate.config import Config
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.file_lock import (
    GITIGNORE,
    IGNORE_ALL,
    OUTPUT_LOCK,
    WORKDIR_LOCK,
    WORKDIR_LOCK_DIR,
    gate_files,
    hold,
)


def config_in(tmp_path: Path) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir(exist_ok=True)
    return Config(workdir=workdir, output_dir=workdir / "repro-gate-out")


def test_holding_creates_both_lock_files_git_ignored_with_our_pid(tmp_path: Path) -> None:
    config = config_in(tmp_path)

    with hold(config, wait=False):
        output_pid = (config.output_dir / OUTPUT_LOCK).read_text()
        workdir_pid = (config.workdir / WORKDIR_LOCK).read_text()

    assert output_pid == workdir_pid == f"{os.getpid()}\n"
    assert (config.output_dir / GITIGNORE).read_text() == IGNORE_ALL
    assert (config.workdir / WORKDIR_LOCK_DIR / GITIGNORE).read_text() == IGNORE_ALL
    assert gate_files(config) == [config.workdir / WORKDIR_LOCK_DIR, config.output_dir]


def test_an_existing_output_directory_keeps_its_own_gitignore(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    config.output_dir.mkdir()
    (config.output_dir / GITIGNORE).write_text("mine\n")

    with hold(config, wait=False):
        pass

    assert (config.output_dir / GITIGNORE).read_text() == "mine\n"


def test_a_second_gate_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    config = config_in(tmp_path)

    with hold(config, wait=False), pytest.raises(GateError) as raised, hold(config, wait=False):
        pass

    assert raised.value.kind is ErrorKind.LOCKED
    # The locks are taken in the order of their paths: the working directory's sorts first.
    assert raised.value.message == (
        f"another repro-gate (pid {os.getpid()}) is using {config.workdir};"
        " wait for it or pass --wait")


def test_the_locks_are_free_again_once_the_holder_leaves(tmp_path: Path) -> None:
    config = config_in(tmp_path)

    with hold(config, wait=False):
        pass
    with hold(config, wait=False):  # would raise if the first were still held
        pass


def test_another_output_directory_over_the_same_workdir_is_still_refused(
    tmp_path: Path,
) -> None:
    first = config_in(tmp_path)
    second = Config(workdir=first.workdir, output_dir=tmp_path / "elsewhere")

    with hold(first, wait=False), pytest.raises(GateError) as raised, hold(second, wait=False):
        pass

    assert f"is using {first.workdir};" in raised.value.message


def test_another_workdir_with_the_same_output_directory_is_still_refused(
    tmp_path: Path,
) -> None:
    first = config_in(tmp_path)
    (tmp_path / "other").mkdir()
    second = Config(workdir=tmp_path / "other", output_dir=first.output_dir)

    with hold(first, wait=False), pytest.raises(GateError) as raised, hold(second, wait=False):
        pass

    assert f"is using {first.output_dir};" in raised.value.message


def test_a_waiting_gate_says_so_and_gets_the_locks_when_they_are_released(
    tmp_path: Path,
) -> None:
    config = config_in(tmp_path)
    said: list[str] = []
    acquired = threading.Event()

    def second_gate() -> None:
        with hold(config, wait=True):
            acquired.set()

    with notices.sent_to(said.append):
        with hold(config, wait=False):
            waiter = threading.Thread(target=second_gate)
            waiter.start()
            deadline = time.monotonic() + 10
            while not said and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not acquired.is_set()  # it waits while the first gate holds the locks
        waiter.join(timeout=10)

    assert acquired.is_set()
    assert said[0] == (f"repro-gate: waiting for another repro-gate (pid {os.getpid()})"
                       f" using {config.workdir}")


def test_a_workdir_without_a_writable_lock_file_is_locked_through_the_directory(
    tmp_path: Path,
) -> None:
    config = config_in(tmp_path)
    (config.workdir / WORKDIR_LOCK_DIR).write_text("not a directory")
    other = Config(workdir=config.workdir, output_dir=tmp_path / "other-out")

    with hold(config, wait=False), pytest.raises(GateError) as raised, hold(other, wait=False):
        pass

    assert raised.value.message.startswith("another repro-gate (pid unknown) is using")


def test_an_output_directory_that_cannot_be_created_is_an_output_dir_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("")
    config = Config(workdir=tmp_path, output_dir=tmp_path / "file" / "out")

    with pytest.raises(GateError) as raised, hold(config, wait=False):
        pass

    assert raised.value.kind is ErrorKind.OUTPUT_DIR
    assert raised.value.message.startswith(f"output directory {config.output_dir} is not"
                                           " writable:")


def test_a_missing_workdir_leaves_only_the_output_lock(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path / "absent", output_dir=tmp_path / "out")

    with hold(config, wait=False):
        assert (config.output_dir / OUTPUT_LOCK).is_file()

    assert not config.workdir.exists()
