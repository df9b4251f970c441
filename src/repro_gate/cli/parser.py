"""The command line's parser: options only by their full name, and a "did you mean" for a
mistyped command, choice or option."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from repro_gate.suggestions import did_you_mean


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that never takes a prefix of an option for the option, and names the
    nearest valid choice of a mistyped one. argparse makes a subcommand's parser of its parent's
    class, so every subcommand, at every level, is a Parser too."""

    def __init__(self, *, allow_abbrev: bool = False, **kwargs: Any) -> None:
        # A prefix (`--artifact` for `--artifacts`) would stand for whichever option it starts
        # today, and stop working, or mean another, once an option is added. (argparse makes a
        # subcommand's parser with keywords only.)
        super().__init__(allow_abbrev=allow_abbrev, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's one check of a command or a `choices` value; argparse turns the error
        # raised here into the usage and one `error:` line.
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as error:
            hint = did_you_mean(str(value), [str(choice) for choice in action.choices or ()])
            if not hint:
                raise
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}") from error


def parse(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> argparse.Namespace:
    """`parser.parse_args(arguments)`, but an unknown option is refused by the parser of the
    command it follows, with the nearest of that command's options."""
    parsed, unknown = parser.parse_known_args(arguments)
    if unknown:
        command = chosen(parser, parsed)
        named = " ".join(word + option_hint(command, word) for word in unknown)
        command.error(f"unrecognized arguments: {named}")
    return parsed


def chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace
           ) -> argparse.ArgumentParser:
    """The parser of the (sub)command `parsed` ran: `runner serve`'s for `runner serve …`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and action.dest:
            name = getattr(parsed, action.dest, None)
            if name in action.choices:
                return chosen(action.choices[name], parsed)
    return parser


def option_hint(parser: argparse.ArgumentParser, word: str) -> str:
    """` (did you mean '--artifacts'?)` for an option-like `word` (`--artifact=x.pt` too)."""
    if not word.startswith(tuple(parser.prefix_chars)):
        return ""
    shown = [option for action in parser._actions if action.help is not argparse.SUPPRESS
             for option in action.option_strings]
    return did_you_mean(word.partition("=")[0], shown)
