"""Command strings run by /bin/sh -c, and the one-line error of a program the shell could not
find or execute."""

from __future__ import annotations

from pathlib import Path

from repro_gate.errors import ErrorKind
from repro_gate.launch.shell import (
    NOT_EXECUTABLE,
    NOT_FOUND,
    TAIL_BYTES,
    last_line,
    shell_argv,
    shell_failure,
    shell_text,
)


def log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.log"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_command_string_runs_through_the_shell_and_is_recognised_again() -> None:
    argv = shell_argv("FOO=1 python train.py && echo done")

    assert argv == ["/bin/sh", "-c", "FOO=1 python train.py && echo done"]
    assert shell_text(argv) == "FOO=1 python train.py && echo done"
    assert shell_text(["python", "train.py"]) is None
    assert shell_text(["/bin/sh", "-c"]) is None
    assert shell_text(["/bin/bash", "-c", "x"]) is None


def test_a_program_the_shell_cannot_find_is_named_with_the_shells_message(
    tmp_path: Path,
) -> None:
    path = log(tmp_path, "starting\n/bin/sh: 1: trian.py: not found\n\n")

    error = shell_failure(shell_argv("python prep.py && trian.py"), NOT_FOUND, path, "run A")

    assert error is not None and error.kind == ErrorKind.COMMAND_NOT_FOUND
    assert error.message == ("command not found: python prep.py && trian.py"
                             " (the shell said: /bin/sh: 1: trian.py: not found; run A)")


def test_a_missing_program_is_named_as_written_after_a_pythonpath_prefix(tmp_path: Path) -> None:
    argv = shell_argv("PYTHONPATH=lib trian.py")

    error = shell_failure(argv, NOT_FOUND, tmp_path / "no-log", "run A")

    assert argv[2] != "PYTHONPATH=lib trian.py"  # the gate's folders go in front of lib
    assert error is not None
    assert error.message.startswith("command not found: PYTHONPATH=lib trian.py (")


def test_a_program_that_is_not_executable_and_a_silent_shell_are_described(
    tmp_path: Path,
) -> None:
    error = shell_failure(shell_argv("./train.sh\n  --fast"), NOT_EXECUTABLE,
                          tmp_path / "no-log", "run B")

    assert error is not None
    assert error.message == ("command is not executable: ./train.sh --fast"
                             " (/bin/sh exited with code 126; run B)")


def test_other_exits_and_argv_commands_are_no_shell_failure(tmp_path: Path) -> None:
    path = log(tmp_path, "Traceback ...\n")

    assert shell_failure(shell_argv("python train.py"), 1, path, "run A") is None
    assert shell_failure(shell_argv("python train.py"), None, path, "run A") is None
    assert shell_failure(["missing-program"], NOT_FOUND, path, "run A") is None


def test_the_last_line_is_read_from_the_end_of_a_large_log(tmp_path: Path) -> None:
    path = log(tmp_path, "x" * (TAIL_BYTES * 4) + "\nthe end\r\n   \n")

    assert last_line(path) == "the end"
    assert last_line(log(tmp_path, "")) == ""
    assert last_line(tmp_path / "missing.log") == ""
