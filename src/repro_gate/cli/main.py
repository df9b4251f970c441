"""The `repro-gate` command line: one module per subcommand under `repro_gate.cli.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from repro_gate import __version__
from repro_gate.errors import EXIT_ERROR, GateError

# Subcommand name -> module in repro_gate.cli.commands; each module has `add_parser` and `run`.
COMMANDS = {
    "check": "check",
    "compare": "compare",
    "fingerprint": "fingerprint",
    "diff": "diff",
    "doctor": "doctor",
    "report": "report",
    "push": "push",
    "action": "action",
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="repro-gate",
        description=(
            "Reproducibility gate for ML training: runs a seeded training twice with determinism"
            " on, compares the runs step by step and tensor by tensor, and reports the verdict"
            " and the cost of determinism."
        ),
    )
    parser.add_argument("--version", action="version", version=f"repro-gate {__version__}")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"repro_gate.cli.commands.{module_name}")
        module.add_parser(subparsers, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except GateError as error:
        # The one place that prints a GateError; commands raise it and never print it themselves.
        print(f"repro-gate: error: {error.message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("repro-gate: interrupted", file=sys.stderr)
        return EXIT_ERROR
