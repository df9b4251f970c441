"""The keys of what runs and how runs are compared: their flags and inputs give the typed
configuration, and the texts name the model's defaults."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides
from repro_gate.config.keys import run
from repro_gate.config.keys.base import COMPARISON, RUN

BY_PATH = {entry.path: entry for entry in run.KEYS}


def from_flags(tmp_path: Path, *argv: str) -> Config:
    return config.load(None, overrides.from_flags(build_parser().parse_args(["check", *argv])),
                       tmp_path)


def test_the_keys_are_top_level_or_the_compare_section_and_grouped_so() -> None:
    assert {entry.section for entry in run.KEYS} == {None, "compare"}
    assert {entry.group for entry in run.KEYS if entry.flags} == {RUN, COMPARISON}


def test_a_command_flag_runs_through_the_shell_and_words_after_dashes_do_not(
    tmp_path: Path,
) -> None:
    assert from_flags(tmp_path, "--command", "python t.py && echo ok").command == (
        "python t.py && echo ok")
    assert from_flags(tmp_path, "--", "python", "t.py").command == ("python", "t.py")


def test_the_run_flags_set_their_fields(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    loaded = from_flags(tmp_path, "--name", "lm", "--workdir", "sub", "-a", "*.pt", "-a",
                        "ckpt/*.pt", "--seed", "7", "--runs", "3", "--timeout", "60",
                        "--env", "K=V", "--determinism", "strict", "--no-fail-fast",
                        "--tolerance", "atol=1e-6,rtol=0", "--allow-fork-pull-requests")

    assert (loaded.name, loaded.workdir, loaded.artifacts) == (
        "lm", (tmp_path / "sub").resolve(), ("*.pt", "ckpt/*.pt"))
    assert (loaded.seed, loaded.runs, loaded.timeout, loaded.env) == (7, 3, 60.0, {"K": "V"})
    assert (loaded.determinism, loaded.fail_fast, loaded.allow_fork_pull_requests) == (
        "strict", False, True)
    assert (loaded.tolerance.bitwise, loaded.tolerance.atol) == (False, 1e-6)


def test_the_inputs_give_what_the_flags_give(tmp_path: Path) -> None:
    inputs = {"INPUT_NAME": "lm", "INPUT_RUNS": "3", "INPUT_SEED": "7",
              "INPUT_ARTIFACTS": "*.pt\nckpt/*.pt", "INPUT_TOLERANCE": "atol=1e-6,rtol=0"}

    from_inputs = config.load(None, overrides.from_action_inputs(inputs), tmp_path)

    assert from_inputs == from_flags(tmp_path, "--name", "lm", "--runs", "3", "--seed", "7",
                                     "-a", "*.pt", "-a", "ckpt/*.pt",
                                     "--tolerance", "atol=1e-6,rtol=0")


def test_the_texts_name_the_defaults_of_the_model() -> None:
    runs, tolerance = BY_PATH["runs"], BY_PATH["tolerance"]

    assert runs.help.format(default=runs.default) == "deterministic runs to compare (default 2)"
    assert f"(default {runs.default})" in runs.input_description
    assert tolerance.help.format(default=tolerance.default).startswith("'bitwise' (default)")
    assert BY_PATH["compare.ignore"].flags == ()  # structured: the config file only
