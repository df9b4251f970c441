"""The keys of the cost of determinism and of the embedded reference training."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides
from repro_gate.config.keys import cost
from repro_gate.config.keys.base import COST, REFERENCE

BY_PATH = {entry.path: entry for entry in cost.KEYS}


def from_flags(tmp_path: Path, *argv: str) -> Config:
    return config.load(None, overrides.from_flags(build_parser().parse_args(["check", *argv])),
                       tmp_path)


def test_cost_keys_sit_in_the_cost_group_and_the_others_in_the_reference_one() -> None:
    for entry in cost.KEYS:
        assert entry.group == (COST if entry.section == "cost" else REFERENCE), entry.path


def test_the_cost_flags_set_the_cost_section(tmp_path: Path) -> None:
    loaded = from_flags(tmp_path, "--no-cost", "--cost-steps", "40", "--cost-warmup", "3",
                        "--cost-blocks", "8", "--cost-block-steps", "2",
                        "--cost-block-seconds", "0.5", "--cost-max-width", "10",
                        "--cost-max-pct", "25", "--cost-breakdown", "--noise-floor")

    assert loaded.cost.enabled is False
    assert (loaded.cost.steps, loaded.cost.warmup, loaded.cost.blocks) == (40, 3, 8)
    assert (loaded.cost.block_steps, loaded.cost.block_seconds) == (2, 0.5)
    assert (loaded.cost.max_width_pct, loaded.cost.max_pct) == (10.0, 25.0)
    assert loaded.cost.breakdown and loaded.cost.noise_floor


def test_the_reference_flags_set_the_reference_training(tmp_path: Path) -> None:
    loaded = from_flags(tmp_path, "--device", "cpu", "--steps", "10", "--batch-size", "4",
                        "--width", "8")

    assert (loaded.reference.device, loaded.reference.steps, loaded.reference.batch_size,
            loaded.reference.width) == ("cpu", 10, 4, 8)


@pytest.mark.parametrize(("path", "written"), [("cost.blocks", "16"),
                                                ("cost.block_seconds", "0.25")])
def test_an_input_description_names_the_models_default(path: str, written: str) -> None:
    entry = BY_PATH[path]

    assert f"{entry.default:g}" == written
    assert f"else {written}." in entry.input_description
    assert f"else {written}." in entry.input_doc


def test_percent_signs_in_the_help_survive_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    entry = BY_PATH["cost.max_width_pct"]

    with pytest.raises(SystemExit):
        build_parser().parse_args(["check", "--help"])

    shown = " ".join(capsys.readouterr().out.split())
    assert "widest 95% interval reported as measured, in percentage points (default 20)" in shown
    assert "lengthen blocks to last at least S seconds, 0: off (default 0.25)" in shown
    assert entry.help.format(default=entry.default).endswith("(default 20)")
