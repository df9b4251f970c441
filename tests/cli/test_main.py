"""The command line's dispatch and its one error boundary, called in-process: every failure is
one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from repro_gate import __version__
from repro_gate.cli.main import COMMANDS, build_parser, main
from repro_gate.errors import EXIT_ERROR, EXIT_REFUSED, ForkRefusedError


def test_every_command_is_a_subcommand_of_the_parser() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))

    assert set(subparsers.choices) == set(COMMANDS)
    assert {"check", "compare", "diff", "runner", "upgrade"} <= set(COMMANDS)


def test_version_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out == f"repro-gate {__version__}\n"


def test_a_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])

    assert exited.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


def test_dashes_as_an_option_value_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--runs=--"])

    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "repro-gate: error: argument --runs: expected a value, not '--'")


def test_dashes_after_the_end_of_options_are_the_command() -> None:
    arguments = build_parser().parse_args(["check", "--", "python", "--x=--"])

    assert arguments.trailing_command == ["--", "python", "--x=--"]


def test_a_gate_error_is_one_line_and_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"

    code = main(["diff", str(missing), str(missing)])

    assert code == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("repro-gate: error: ")
    assert str(missing) in captured.err


def replace_check(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setitem(COMMANDS, "check", (COMMANDS["check"][0], handler))


@pytest.mark.parametrize(("error", "code", "line"), [
    (RuntimeError("boom\nsecond line"), EXIT_ERROR,
     "repro-gate: internal error: RuntimeError: boom"),
    (KeyboardInterrupt(), EXIT_ERROR, "repro-gate: interrupted"),
    (ForkRefusedError("a fork's code on a self-hosted runner"),
     EXIT_REFUSED, "repro-gate: error: a fork's code on a self-hosted runner"),
])
def test_what_escapes_a_command_becomes_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: BaseException,
    code: int, line: str,
) -> None:
    replace_check(monkeypatch, error)

    assert main(["check"]) == code
    assert capsys.readouterr().err == line + "\n"


def test_the_handler_gets_the_parsed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def handler(args: argparse.Namespace) -> int:
        seen.append((args.command_name, args.runs, args.trailing_command))
        return 7

    monkeypatch.setitem(COMMANDS, "check", (COMMANDS["check"][0], handler))

    assert main(["check", "--runs", "3", "--", "python", "train.py"]) == 7
    assert seen == [("check", 3, ["--", "python", "train.py"])]
