"""`repro-gate check` refusing bad input before any run starts: the exit code, the one error
line, and the error manifest it still writes (printed too with --json). A repository git
cannot read is such an input: the gate reads git before the first run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.git_repo import git, lose_object

from repro_gate import validation
from repro_gate.cli.commands.check import check, session
from repro_gate.cli.main import main
from repro_gate.cli.session import Output
from repro_gate.errors import EXIT_ERROR, ConfigError


def manifest_in(output_dir: Path) -> dict[str, object]:
    document = json.loads((output_dir / "manifest.json").read_text())
    assert validation.errors("manifest", document) == []
    return document


@pytest.mark.parametrize(("argv", "message"), [
    (["--runs", "1"], "configuration: runs: must be an integer >= 2"),
    (["--env", "NOEQ"], "--env: expected KEY=VALUE, got 'NOEQ'"),
    (["-a", "/abs/*.pt"], "artifacts: glob '/abs/*.pt' must be relative to the run directory"
                          " (absolute paths are not allowed)"),
])
def test_bad_flags_are_one_error_line_and_an_error_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], message: str,
) -> None:
    monkeypatch.chdir(tmp_path)

    code = main(["check", "-o", "out", *argv, "--", "python", "train.py"])

    assert code == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.err == f"repro-gate: error: {message}\n"
    assert captured.out == ""
    document = manifest_in(tmp_path / "out")
    assert document["verdict"] == "error"
    assert document["reasons"] == [{"code": "config", "message": message}]
    assert document["runs"] == []


def test_with_json_the_error_manifest_is_printed_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["check", "--json", "--env", "NOEQ", "--", "python", "train.py"]) == EXIT_ERROR

    printed = json.loads(capsys.readouterr().out)
    assert printed == manifest_in(tmp_path / "repro-gate-out")  # the default output directory
    assert printed["output_dir"] == str(tmp_path / "repro-gate-out")


def test_a_missing_config_file_named_by_the_caller_is_raised_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigError):
        check(tmp_path / "absent.yml", {"output_dir": "elsewhere"}, Output(quiet=True))

    assert manifest_in(tmp_path / "elsewhere")["verdict"] == "error"


def test_the_sessions_error_record_goes_to_its_output_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    gate_session = session("out", Output(as_json=True, wait=True))

    gate_session.record_error(ConfigError("timeout: must be > 0"))

    assert gate_session.wait is True
    document = manifest_in(tmp_path / "out")
    assert document["reasons"] == [{"code": "config", "message": "timeout: must be > 0"}]
    assert json.loads(capsys.readouterr().out) == document


def test_a_clone_missing_an_object_ends_git_failed_with_gits_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("print('train')\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-q", "-m", "first")
    lost = lose_object(tmp_path, "train.py")
    (tmp_path / "train.py").write_text("print('edited')\n")
    monkeypatch.chdir(tmp_path)

    code = main(["check", "-o", "out", "--no-cost", "--", sys.executable, "train.py"])

    assert code == EXIT_ERROR
    [reason] = manifest_in(tmp_path / "out")["reasons"]
    assert reason["code"] == "git_failed"
    assert reason["message"].startswith(f"git -C {tmp_path} diff HEAD ")
    assert reason["message"].endswith(f"failed with exit code 128: fatal: unable to read {lost}")
    captured = capsys.readouterr()
    assert f"  {reason['message']}" in captured.out.splitlines()
    assert "Traceback" not in captured.out + captured.err
    assert not (tmp_path / "out" / "runs" / "A").exists(), "git is read before any run"
