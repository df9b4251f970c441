"""The configuration flags built from the key table: their types, actions, choices and help
sections, parsed by a real argparse parser."""

from __future__ import annotations

import argparse

import pytest

from repro_gate.cli.flags import add_config_options, add_key_flags
from repro_gate.config.keys import KEYS, Scope


def gate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test", exit_on_error=False)
    add_config_options(parser)
    return parser


def test_every_gate_key_with_a_flag_is_registered() -> None:
    options = {option for action in gate_parser()._actions for option in action.option_strings}

    flagged = {flag for key in KEYS if key.scope is Scope.GATE for flag in key.flags}
    assert flagged <= options
    assert {"--config", "--wait"} <= options
    assert "--lock" not in options  # an upgrade key: not a gate flag


def test_flags_parse_to_the_types_of_their_keys() -> None:
    args = gate_parser().parse_args([
        "--runs", "3", "--timeout", "1.5", "-a", "*.pt", "--artifacts", "out/*.json",
        "--env", "A=1", "--env", "B=2", "--no-fail-fast", "--cost", "--determinism", "strict",
        "--command", "python train.py", "--golden", "g.json", "--config", "c.yml", "--wait",
    ])

    assert args.runs == 3
    assert args.timeout == 1.5
    assert args.artifacts == ["*.pt", "out/*.json"]
    assert args.env == ["A=1", "B=2"]
    assert args.fail_fast is False
    assert args.cost_enabled is True  # the key's own destination
    assert args.determinism == "strict"
    assert args.command_line == "python train.py"
    assert args.golden == "g.json"
    assert (args.config, args.wait) == ("c.yml", True)


def test_flags_not_given_are_none_so_the_file_decides() -> None:
    args = gate_parser().parse_args([])

    assert args.fail_fast is None
    assert args.runs is None
    assert args.artifacts is None
    assert args.wait is False


@pytest.mark.parametrize("argv", [["--runs", "two"], ["--determinism", "loose"],
                                  ["--timeout", "soon"]])
def test_a_value_of_the_wrong_kind_is_refused(argv: list[str]) -> None:
    with pytest.raises(argparse.ArgumentError):
        gate_parser().parse_args(argv)


def test_flags_are_grouped_by_section_or_put_in_the_given_group() -> None:
    parser = gate_parser()
    titles = {group.title for group in parser._action_groups}
    upgrade = argparse.ArgumentParser(prog="upgrade")
    group = upgrade.add_argument_group("upgrade check")

    add_key_flags(upgrade, Scope.UPGRADE, group)

    assert {"what to run", "comparison", "cost of determinism", "container runs"} <= titles
    assert {a.dest for a in group._group_actions} == {
        "upgrade_lock", "inherit_site_packages", "upgrade_tolerance", "max_bisect_runs",
        "env_cache"}
    assert upgrade.parse_args(["--max-bisect-runs", "4"]).max_bisect_runs == 4


def test_the_help_shows_each_keys_default() -> None:
    text = gate_parser().format_help()

    runs = next(key for key in KEYS if key.flags == ("--runs",))
    assert runs.help.format(default=runs.default) in " ".join(text.split())
