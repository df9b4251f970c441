"""The command line's parser: options by their full name only, at every level, and the nearest
valid name for a mistyped command, option or choice. Through the real `main`: argparse's usage,
then its one `error:` line, exit code 2."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from repro_gate.cli.main import COMMANDS, build_parser, main
from repro_gate.cli.parser import Parser


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield from every_parser(subparser)


def error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def test_every_parser_and_subparser_refuses_abbreviations() -> None:
    parsers = list(every_parser(build_parser()))

    assert len(parsers) > len(COMMANDS) + 1  # `runner`'s own subcommands are among them
    assert all(isinstance(parser, Parser) for parser in parsers)
    assert [parser.prog for parser in parsers if parser.allow_abbrev] == []


@pytest.mark.parametrize(("argv", "line"), [
    (["check", "--artifact", "model.pt"],
     "repro-gate check: error: unrecognized arguments: --artifact (did you mean '--artifacts'?)"),
    (["check", "--artifact=model.pt", "--jsn"],
     "repro-gate check: error: unrecognized arguments: --artifact=model.pt"
     " (did you mean '--artifacts'?) --jsn (did you mean '--json'?)"),
    (["check", "--epochs", "3"], "repro-gate check: error: unrecognized arguments: --epochs"),
    (["runner", "check-config", "--config", "runner.yml", "--configg"],
     "repro-gate runner check-config: error: unrecognized arguments: --configg"
     " (did you mean '--config'?)"),
])
def test_an_unknown_option_is_named_with_the_nearest_option_of_its_command(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str,
) -> None:
    assert error_line(argv, capsys) == line


@pytest.mark.parametrize(("argv", "line"), [
    (["chek"], "repro-gate: error: argument COMMAND: invalid choice: 'chek'"
               " (did you mean 'check'?)"),
    (["runner", "serv"], "repro-gate runner: error: argument ACTION: invalid choice: 'serv'"
                         " (did you mean 'serve'?)"),
    (["check", "--determinism", "strikt"], "repro-gate check: error: argument --determinism:"
                                           " invalid choice: 'strikt' (did you mean 'strict'?)"),
])
def test_a_mistyped_command_or_choice_is_named_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str,
) -> None:
    assert error_line(argv, capsys) == line


def test_a_choice_near_none_keeps_the_list_of_choices(capsys: pytest.CaptureFixture[str]) -> None:
    line = error_line(["check", "--determinism", "x"], capsys)

    assert line.startswith("repro-gate check: error: argument --determinism: invalid choice: 'x'")
    assert "warn" in line and "did you mean" not in line
