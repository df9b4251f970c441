"""Local runs: tiny Python children started in their own process group, their output streamed
and logged, stopped at the timeout, and their missing commands named."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import RunSpec
from repro_gate.launch.local import LocalLauncher
from repro_gate.launch.shell import shell_argv
from repro_gate.probe import ENV_RUN_DIR


def spec(tmp_path: Path, argv: list[str], timeout: float | None = 20.0) -> RunSpec:
    return RunSpec("A", "deterministic", argv, tmp_path, tmp_path / "runs" / "A",
                   {"REPRO_GATE_MODE": "deterministic"}, timeout, tmp_path / "logs" / "A.log",
                   [])


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_output_goes_to_the_sink_and_the_log_and_the_exit_code_is_kept(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    code = "import sys; print('step 1'); print('oops', file=sys.stderr); sys.exit(3)"

    outcome = LocalLauncher().run(spec(tmp_path, python(code)), lines.append)

    assert (outcome.exit_code, outcome.timed_out) == (3, False)
    assert sorted(lines) == ["oops", "step 1"]
    assert sorted((tmp_path / "logs" / "A.log").read_text().splitlines()) == ["oops", "step 1"]


def test_the_run_sees_its_variables_and_not_the_gates_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_local_secret")
    lines: list[str] = []
    code = ("import os; print(os.environ.get('GITHUB_TOKEN'), os.environ['REPRO_GATE_MODE'],"
            f" os.environ['{ENV_RUN_DIR}'], os.getcwd())")

    LocalLauncher().run(spec(tmp_path, python(code)), lines.append)

    assert lines == [f"None deterministic {tmp_path / 'runs' / 'A'} {tmp_path}"]


def test_a_run_past_its_timeout_is_stopped(tmp_path: Path) -> None:
    started = time.monotonic()

    outcome = LocalLauncher().run(spec(tmp_path, python("import time; time.sleep(30)"),
                                       timeout=0.3), lambda line: None)

    assert (outcome.exit_code, outcome.timed_out) == (None, True)
    assert time.monotonic() - started < 10


def test_a_missing_program_is_a_command_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(GateError) as raised:
        LocalLauncher().run(spec(tmp_path, ["no-such-program-xyz", "train.py"]),
                            lambda line: None)

    assert raised.value.kind == ErrorKind.COMMAND_NOT_FOUND
    assert raised.value.message == (
        f"command not found: no-such-program-xyz (run A, in {tmp_path})")


def test_a_program_the_shell_cannot_find_is_named_with_the_shells_words(tmp_path: Path) -> None:
    with pytest.raises(GateError) as raised:
        LocalLauncher().run(spec(tmp_path, shell_argv("no-such-program-xyz --fast")),
                            lambda line: None)

    assert raised.value.kind == ErrorKind.COMMAND_NOT_FOUND
    assert raised.value.message.startswith(
        "command not found: no-such-program-xyz --fast (the shell said: ")
    assert raised.value.message.endswith(f"; run A, in {tmp_path})")
    assert LocalLauncher().python_executable() == sys.executable
