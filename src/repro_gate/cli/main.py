"""The `repro-gate` command line: one module per subcommand under `repro_gate.cli.commands`,
dispatched from `COMMANDS`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from repro_gate import __version__
from repro_gate.cli.commands import (
    action,
    attest,
    bless,
    calibrate,
    check,
    compare,
    diff,
    doctor,
    fingerprint,
    push,
    report,
    runner,
    upgrade,
    verify,
)
from repro_gate.cli.parser import Parser, parse
from repro_gate.errors import EXIT_ERROR, GateError, one_line, printable
from repro_gate.launch import cancel

AddParser = Callable[[Any, str], None]  # registers the subcommand on the subparsers under a name
Handler = Callable[[argparse.Namespace], int]  # runs it; the process exit code

# Subcommand name -> (its parser's registration, its function from the parsed arguments).
COMMANDS: dict[str, tuple[AddParser, Handler]] = {
    "check": (check.add_parser, check.run),
    "upgrade": (upgrade.add_parser, upgrade.run),
    "bless": (bless.add_parser, bless.run),
    "calibrate": (calibrate.add_parser, calibrate.run),
    "compare": (compare.add_parser, compare.run),
    "fingerprint": (fingerprint.add_parser, fingerprint.run),
    "diff": (diff.add_parser, diff.run),
    "doctor": (doctor.add_parser, doctor.run),
    "report": (report.add_parser, report.run),
    "push": (push.add_parser, push.run),
    "attest": (attest.add_parser, attest.run),
    "verify": (verify.add_parser, verify.run),
    "action": (action.add_parser, action.run),
    "runner": (runner.add_parser, runner.run),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered (each a `Parser` as well)."""
    parser = Parser(
        prog="repro-gate",
        description=(
            "Reproducibility gate for ML training: runs a seeded training twice with determinism"
            " on, compares the runs step by step and tensor by tensor, and reports the verdict"
            " and the cost of determinism."
        ),
    )
    parser.add_argument("--version", action="version", version=f"repro-gate {__version__}")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for name, (add_parser, _) in COMMANDS.items():
        add_parser(subparsers, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    _refuse_dashes_as_a_value(parser, arguments)
    args = parse(parser, arguments)
    code = _run(args)
    if cancel.happened():
        # Cancelled: the runs are stopped and the manifest is written. Tearing down the
        # interpreter (torch's modules) can take seconds on a busy runner that kills the job
        # soon, and nothing is left that needs it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _refuse_dashes_as_a_value(parser: argparse.ArgumentParser, arguments: list[str]) -> None:
    """`--opt=--` reaches the command as an empty list, skipping the option's type (argparse's
    handling of `--`): refuse it like any other bad value."""
    for argument in arguments:
        if argument == "--":
            return
        if argument.startswith("-") and argument.endswith("=--"):
            parser.error(f"argument {argument.split('=', 1)[0]}: expected a value, not '--'")



def _run(args: argparse.Namespace) -> int:
    """The subcommand's exit code; every error ends here as one line."""
    try:
        return COMMANDS[args.command_name][1](args)
    except GateError as error:
        # The one place that prints a GateError; commands raise it and never print it themselves.
        print(f"repro-gate: error: {printable(error.message)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("repro-gate: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader of our output went away (`| head`): say nothing more on that pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as error:  # the last resort: one line, never a traceback
        print(f"repro-gate: internal error: {type(error).__name__}: {one_line(error)}",
              file=sys.stderr)
        return EXIT_ERROR
