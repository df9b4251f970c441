"""Running git in a repository made here: its output, or one line with the command and git's
own last word."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.git_repo import git

from repro_gate.errors import ErrorKind, GitFailedError
from repro_gate.fingerprint.git_command import last_line, run_git


def test_the_output_of_a_command_that_works(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")

    assert run_git(tmp_path, "rev-parse", "--is-inside-work-tree") == b"true\n"


def test_a_failing_command_names_itself_and_what_git_said_last(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")

    with pytest.raises(GitFailedError) as failed:
        run_git(tmp_path, "cat-file", "-p", "0" * 40)

    assert failed.value.kind is ErrorKind.GIT_FAILED
    assert failed.value.message == (
        f"git -C {tmp_path} cat-file -p {'0' * 40} failed with exit code 128:"
        f" fatal: Not a valid object name {'0' * 40}")
    assert failed.value.stderr.strip().endswith(f"Not a valid object name {'0' * 40}")


def test_a_command_past_its_time_is_git_failed_too(tmp_path: Path) -> None:
    with pytest.raises(GitFailedError, match=r"^git -C \S+ --version gave no answer within 1e-09"
                                             r" s$"):
        run_git(tmp_path, "--version", timeout=1e-9)


def test_the_last_line_is_the_last_one_with_text() -> None:
    assert last_line("hint: one\nfatal: two\n\n  ") == "fatal: two"
    assert last_line(" \n") == ""
