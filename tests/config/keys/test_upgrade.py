"""The keys of the upgrade check: flags of `upgrade` only, and its options that are no keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import overrides
from repro_gate.config.keys import Scope, upgrade
from repro_gate.config.model import ToleranceConfig, UpgradeConfig


def test_every_upgrade_key_is_scoped_to_the_upgrade_command() -> None:
    assert {entry.scope for entry in upgrade.KEYS} == {Scope.UPGRADE}
    assert {entry.section for entry in upgrade.KEYS} == {"upgrade"}


def test_the_upgrade_flags_set_the_upgrade_section(tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "upgrade", "--lock", "locks/requirements.txt", "--inherit-site-packages",
        "--upgrade-tolerance", "atol=1e-3", "--max-bisect-runs", "3", "--env-cache", "/tmp/e",
    ])

    loaded = config.load(None, overrides.from_flags(args), tmp_path)

    assert loaded.upgrade == UpgradeConfig(
        lock="locks/requirements.txt", inherit_site_packages=True,
        tolerance=ToleranceConfig(bitwise=False, atol=1e-3), max_bisect_runs=3,
        cache_dir="/tmp/e")


def test_the_upgrade_flags_are_not_flags_of_check() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["check", "--max-bisect-runs", "3"])


def test_the_inputs_of_the_upgrade_keys_set_what_their_flags_set(tmp_path: Path) -> None:
    inputs = {"INPUT_LOCK": "uv.lock", "INPUT_INHERIT-SITE-PACKAGES": "true",
              "INPUT_UPGRADE-TOLERANCE": "bitwise", "INPUT_MAX-BISECT-RUNS": "5"}
    args = build_parser().parse_args(["upgrade", "--lock", "uv.lock",
                                      "--inherit-site-packages", "--upgrade-tolerance",
                                      "bitwise", "--max-bisect-runs", "5"])

    assert overrides.from_action_inputs(inputs) == overrides.from_flags(args)


def test_the_options_that_are_not_keys_are_listed_around_them() -> None:
    first = [option.flag for option in upgrade.UPGRADE_OPTIONS if option.first]
    last = [option.flag for option in upgrade.UPGRADE_OPTIONS if not option.first]

    assert first == ["`--upgrade`", "`--upgrade-package NAME`", "`--candidate-lock PATH`"]
    assert last == ["`--write-lock`", "`--json`"]
    max_runs = next(e for e in upgrade.KEYS if e.path == "upgrade.max_bisect_runs")
    assert max_runs.help.format(default=max_runs.default).endswith("(default 32)")
