"""The keys of `vary`: the factors have a flag and an input (a comma list, `all`), what a change
does is set in the config file only; the file takes a list, `all` or `{factors, on_change}`."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import overrides
from repro_gate.config.keys import vary
from repro_gate.config.vary import VARY_FACTORS, VaryConfig

BY_PATH = {entry.path: entry for entry in vary.KEYS}


def factors(tmp_path: Path, text: str) -> tuple[str, ...]:
    (tmp_path / ".repro-gate.yml").write_text(text)
    return config.load(None, {}, tmp_path).vary.factors


def test_the_file_takes_all_a_comma_list_a_list_or_a_mapping(tmp_path: Path) -> None:
    assert factors(tmp_path, "name: x\n") == ()
    assert factors(tmp_path, "vary: all\n") == VARY_FACTORS
    assert factors(tmp_path, "vary: path, threads\n") == ("threads", "path")  # the runs' order
    assert factors(tmp_path, "vary: [hostname, hostname]\n") == ("hostname",)
    (tmp_path / ".repro-gate.yml").write_text("vary: {factors: [time], on_change: warn}\n")
    loaded = config.load(None, {}, tmp_path).vary
    assert (loaded.factors, loaded.on_change) == (("time",), "warn")


def test_the_flag_and_the_input_give_the_same_factors_over_the_files_on_change(
    tmp_path: Path,
) -> None:
    (tmp_path / ".repro-gate.yml").write_text("vary: {factors: [time], on_change: warn}\n")
    args = build_parser().parse_args(["check", "--vary", "threads,path"])

    from_flag = config.load(None, overrides.from_flags(args), tmp_path)
    from_input = config.load(None, overrides.from_action_inputs({"INPUT_VARY": "threads,path"}),
                             tmp_path)

    assert from_flag == from_input
    assert (from_flag.vary.factors, from_flag.vary.on_change) == (("threads", "path"), "warn")


def test_on_change_is_the_files_and_fails_by_default() -> None:
    on_change = BY_PATH["vary.on_change"]

    assert on_change.flags == () and on_change.action_input is None
    assert on_change.choices == ("fail", "warn")
    assert on_change.default == VaryConfig().on_change == "fail"
    assert BY_PATH["vary.factors"].default == []
