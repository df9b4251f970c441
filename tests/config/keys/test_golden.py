"""The keys of the golden trajectory: its path has a flag and an input; its tolerance and what
a change does are set in the config file only."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import overrides
from repro_gate.config.keys import golden
from repro_gate.config.model import GoldenConfig

BY_PATH = {entry.path: entry for entry in golden.KEYS}


def test_the_golden_flag_and_input_set_its_path_relative_to_the_cwd(tmp_path: Path) -> None:
    args = build_parser().parse_args(["check", "--golden", "golden/a100.json"])

    from_flag = config.load(None, overrides.from_flags(args), tmp_path)
    from_input = config.load(None, overrides.from_action_inputs(
        {"INPUT_GOLDEN": "golden/a100.json"}), tmp_path)

    assert from_flag.golden.path == str(tmp_path.resolve() / "golden" / "a100.json")
    assert from_input == from_flag


def test_tolerance_and_on_change_come_from_the_file(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text(
        "golden:\n  path: g.json\n  on_change: warn\n"
        "  tolerance: {loss: {rtol: 0.01, atol: 0, steps_outside: 2}}\n")

    loaded = config.load(None, {}, tmp_path).golden

    assert loaded.on_change == "warn"
    assert loaded.tolerance == {"loss": {"rtol": 0.01, "atol": 0, "steps_outside": 2}}
    assert loaded.path == str(tmp_path.resolve() / "g.json")
    assert BY_PATH["golden.tolerance"].flags == BY_PATH["golden.on_change"].flags == ()
    assert BY_PATH["golden.on_change"].action_input is None


def test_the_choices_of_on_change_are_the_models_and_the_default_is_fail() -> None:
    on_change = BY_PATH["golden.on_change"]

    assert on_change.choices == ("fail", "warn")
    assert on_change.default == GoldenConfig().on_change == "fail"


def test_the_path_help_names_the_default_folder() -> None:
    entry = BY_PATH["golden.path"]

    assert entry.default == GoldenConfig().path
    assert entry.help.format(default=entry.default).endswith(f"(default {GoldenConfig().path})")
    assert GoldenConfig().path.rstrip("/") in entry.input_description
