"""Command-line flags for every configuration key, from the table `config.keys.KEYS`
(`config.overrides.from_flags` reads them back)."""

from __future__ import annotations

import argparse
from typing import Any

from repro_gate.config.keys import KEYS, ConfigKey, Kind, Scope


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """Register `--config` and one flag per configuration key (flags win over the file)."""
    parser.add_argument("--config", metavar="PATH",
                        help="config file (default: .repro-gate.yml in the current directory)")
    add_key_flags(parser, Scope.GATE)
    parser.add_argument("--wait", action="store_true",
                        help="wait for another gate using the same output directory or working"
                             " directory, instead of stopping with an error")


def add_key_flags(parser: argparse.ArgumentParser, scope: Scope,
                  group: argparse._ArgumentGroup | None = None) -> None:
    """Register the flags of the keys of `scope`, in their help sections (or in `group`)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for entry in KEYS:
        if not entry.flags or entry.scope is not scope:
            continue
        target: argparse._ArgumentGroup | argparse.ArgumentParser = parser
        if group is not None:
            target = group
        elif entry.group is not None:
            if entry.group not in groups:
                groups[entry.group] = parser.add_argument_group(entry.group)
            target = groups[entry.group]
        target.add_argument(*entry.flags, **_flag_options(entry))


def _flag_options(entry: ConfigKey) -> dict[str, Any]:
    """The `add_argument` keywords of `entry`'s flag."""
    options: dict[str, Any] = {"help": entry.help.format(default=entry.default)}
    if entry.dest is not None:
        options["dest"] = entry.dest
    if entry.metavar is not None:
        options["metavar"] = entry.metavar
    if entry.choices:
        options["choices"] = list(entry.choices)
    if entry.kind is Kind.BOOLEAN:
        options.update(action=argparse.BooleanOptionalAction, default=None)
    elif entry.kind in (Kind.LIST, Kind.ENV):
        options["action"] = "append"
    elif entry.kind is Kind.INTEGER:
        options["type"] = int
    elif entry.kind is Kind.NUMBER:
        options["type"] = float
    return options
