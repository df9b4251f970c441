"""Command strings run through `/bin/sh -c` as people write them; argv lists run as is."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from helpers.gate_cli import Result, assert_one_line_error, check

PYTHON = shlex.quote(sys.executable)  # the test interpreter: it has torch


def assert_passed(result: Result) -> dict:
    manifest = result.manifest
    assert result.exit_code == 0, result.stdout + result.stderr
    assert manifest["verdict"] == "pass"
    assert manifest["comparison"]["trajectory"]["steps_compared"] > 0
    return manifest



def test_a_chain_runs_the_prep_step_then_the_training(project: Path) -> None:
    # Its own gate: a chain of two programs.
    command = f"{PYTHON} prepare_data.py && {PYTHON} train_on_prepared.py"

    result = check(project, "--no-cost", "--command", command)

    manifest = assert_passed(result)
    # Each run works in its own copy of the project, which keeps what the run wrote.
    for run in ("A", "B"):
        work = project / "repro-gate-out" / "runs" / run / "work"
        assert (work / "prepared_data.txt").read_text() == "1234\n"
    assert not (project / "prepared_data.txt").exists()
    assert [run["steps"] for run in manifest["runs"]] == [6, 6]
    # The manifest records the command as the user gave it: one string.
    assert manifest["config"]["command"] == command


def test_a_variable_prefix_a_pipe_and_a_redirection_work(project: Path) -> None:
    # Its own gate: a command string of shell syntax.
    (project / ".repro-gate.yml").write_text(
        f"command: GREETING=hello {PYTHON} print_environment.py 2>&1 | grep GREETING > seen.txt\n"
        "cost: {enabled: false}\n"
    )

    result = check(project)

    assert_passed(result)
    work = project / "repro-gate-out" / "runs" / "A" / "work"
    assert (work / "seen.txt").read_text() == "GREETING=hello\n"


def test_a_failing_first_step_fails_the_run_with_its_exit_code(project: Path) -> None:
    # Its own gate: a chain whose first program fails.
    result = check(project, "--command", f"false && {PYTHON} deterministic.py")

    manifest = assert_one_line_error(result, "run_failed",
                                     "run A (deterministic) exited with code 1")
    assert manifest["runs"][0]["exit_code"] == 1
    assert manifest["runs"][0]["steps"] == 0


def test_a_missing_program_in_a_string_is_command_not_found(project: Path) -> None:
    result = check(project, "--command", "no-such-trainer --epochs 1")

    assert_one_line_error(result, "command_not_found",
                          "command not found: no-such-trainer --epochs 1 (the shell said: ",
                          "no-such-trainer: not found")


def test_an_argv_list_passes_shell_words_literally(project: Path) -> None:
    # Its own gate: a command list from the config file.
    (project / ".repro-gate.yml").write_text(
        f"command: [{sys.executable}, print_arguments.py, '&&', touch, made-by-a-shell, '$HOME']\n"
        "cost: {enabled: false}\n"
    )

    result = check(project)

    manifest = assert_passed(result)
    log = (project / "repro-gate-out/logs/A.log").read_text()
    assert "arguments: ['&&', 'touch', 'made-by-a-shell', '$HOME']" in log
    assert not (project / "made-by-a-shell").exists()
    assert manifest["config"]["command"][1:3] == ["print_arguments.py", "&&"]


def test_arguments_after_the_double_dash_run_without_a_shell(project: Path) -> None:
    # Its own gate: arguments after `--`.
    result = check(project, "--no-cost", "--", sys.executable, "print_arguments.py", "a;b", "|")

    assert_passed(result)
    log = (project / "repro-gate-out/logs/A.log").read_text()
    assert "arguments: ['a;b', '|']" in log


def test_a_blank_command_string_is_a_config_error(project: Path) -> None:
    result = check(project, "--command", "   ")

    assert_one_line_error(result, "config", "command: must not be empty")
