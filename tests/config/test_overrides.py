"""Flags and action inputs turned into a partial config document, and their value parsers."""

from __future__ import annotations

import pytest

from repro_gate.cli.main import build_parser
from repro_gate.config import overrides
from repro_gate.errors import ConfigError


def test_flags_become_a_document_shaped_like_the_config_file() -> None:
    args = build_parser().parse_args([
        "check", "--env", "A=1", "--env", "B=x=y", "--tolerance", "atol=1e-6,rtol=0",
        "--gpus", "0,1", "--cost-blocks", "5", "--no-fail-fast", "--", "python", "t.py",
    ])

    assert overrides.from_flags(args) == {
        "command": ["python", "t.py"],
        "env": {"A": "1", "B": "x=y"},
        "tolerance": {"atol": 1e-6, "rtol": 0.0},
        "gpus": ["0", "1"],
        "cost": {"blocks": 5},
        "fail_fast": False,
    }


def test_no_flag_gives_an_empty_document() -> None:
    assert overrides.from_flags(build_parser().parse_args(["check"])) == {}


def test_action_inputs_are_trimmed_typed_and_empty_ones_ignored() -> None:
    environ = {
        "INPUT_RUNS": " 3 ",
        "INPUT_TIMEOUT": "90.5",
        "INPUT_COST-BREAKDOWN": "TRUE",
        "INPUT_ARTIFACTS": "model.pt, ckpt/*.pt\nlogs/*.json",
        "INPUT_SEED": "",
        "INPUT_NAME": "  ",
    }

    assert overrides.from_action_inputs(environ) == {
        "runs": 3,
        "timeout": 90.5,
        "cost": {"breakdown": True},
        "artifacts": ["model.pt", "ckpt/*.pt", "logs/*.json"],
    }


def test_a_runner_slots_gpu_is_used_unless_the_gpus_input_is_set() -> None:
    assert overrides.from_action_inputs({"REPRO_GATE_GPUS": "GPU-1234"}) == {
        "gpus": ["GPU-1234"]}
    assert overrides.from_action_inputs({"REPRO_GATE_GPUS": "GPU-1234",
                                         "INPUT_GPUS": "none"}) == {"gpus": "none"}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"INPUT_RUNS": "two"}, "input runs: must be a number, got 'two'"),
        ({"INPUT_TIMEOUT": "nan"}, "input timeout: must be a finite number >= 0, got 'nan'"),
        ({"INPUT_TIMEOUT": "-1"}, "input timeout: must be a finite number >= 0, got '-1'"),
        ({"INPUT_COST-BREAKDOWN": "yes"}, "input cost-breakdown: must be true or false"),
    ],
)
def test_a_bad_input_is_a_one_line_config_error_naming_it(environ: dict[str, str],
                                                          message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        overrides.from_action_inputs(environ)

    assert raised.value.message.startswith(message)


def test_tolerance_is_bitwise_or_atol_and_rtol() -> None:
    assert overrides.parse_tolerance(" bitwise ") == "bitwise"
    assert overrides.parse_tolerance("rtol=0.01") == {"rtol": 0.01}
    for text in ("exact", "atol", "atol=1,ulp=2"):
        with pytest.raises(ConfigError, match="expected 'bitwise' or 'atol=X,rtol=Y'"):
            overrides.parse_tolerance(text)
    with pytest.raises(ConfigError, match="--tolerance: atol: must be a number"):
        overrides.parse_tolerance("atol=small")


def test_gpus_are_all_none_a_count_or_ids() -> None:
    assert overrides.parse_gpus("all") == "all"
    assert overrides.parse_gpus(" none ") == "none"
    assert overrides.parse_gpus("2") == 2
    assert overrides.parse_gpus("0, 1\nGPU-8f2a") == ["0", "1", "GPU-8f2a"]


def test_env_pairs_need_a_name_and_an_equals_sign() -> None:
    assert overrides.parse_env_pairs(["A=", "B=c=d"]) == {"A": "", "B": "c=d"}
    for pair in ("NOVALUE", "=value"):
        with pytest.raises(ConfigError, match="--env: expected KEY=VALUE"):
            overrides.parse_env_pairs([pair])


def test_an_input_name_is_looked_up_as_the_runner_passes_it() -> None:
    environ = {"INPUT_WORKING-DIRECTORY": " sub ", "INPUT_MY_INPUT": "x"}

    assert overrides.action_input(environ, "working-directory") == "sub"
    assert overrides.action_input(environ, "my input") == "x"
    assert overrides.action_input(environ, "absent") == ""
