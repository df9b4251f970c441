"""Every bad input to `repro-gate check`: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import Result, check, script
from helpers.run_processes import MARK, survivors

from repro_gate import validation


def assert_clean_error(result: Result, *needles: str) -> None:
    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    for needle in needles:
        assert needle in output, output


def assert_error_manifest(result: Result, code: str) -> dict:
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["verdict"] == "error"
    assert manifest["reasons"][0]["code"] == code
    return manifest


def test_config_file_missing(tmp_path: Path) -> None:
    result = check(tmp_path, "--config", "nope.yml")
    assert_clean_error(result, "config file nope.yml not found")


def test_config_not_yaml(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text("runs: [2, 3\nseed: 1\n")
    result = check(tmp_path)
    assert_clean_error(result, ".repro-gate.yml: not valid YAML (line")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("runs: 1\n", "runs: must be an integer >= 2"),
        ("seed: -3\n", "seed: must be an integer or null from 0 to 4294967295"),
        ("determinism: sometimes\n", "determinism: must be one of warn, strict"),
        ("tolerance: exact\n", "tolerance: must be 'bitwise' or a mapping with atol"),
        ("timeout: 0\n", "timeout: must be a number > 0"),
        ("cost: {steps: -1}\n", "cost.steps: must be an integer >= 0"),
        ("artifacts: model.pt\n", "artifacts: must be a list of non-empty strings"),
        ("epochs: 3\n", "unknown key 'epochs'"),
        ("- just\n- a list\n", "must be a mapping of keys to values"),
    ],
)
def test_config_against_the_schema(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / ".repro-gate.yml").write_text(content)
    result = check(tmp_path)
    assert_clean_error(result, message)
    assert len(result.stderr.strip().splitlines()) == 1


def test_runs_below_two_on_the_command_line(tmp_path: Path) -> None:
    result = check(tmp_path, "--runs", "1")
    assert_clean_error(result, "runs: must be an integer >= 2")
    # Nothing ran, but CI still finds a manifest saying why.
    manifest = assert_error_manifest(result, "config")
    assert manifest["runs"] == []


def test_command_not_found(tmp_path: Path) -> None:
    result = check(tmp_path, "--", "no-such-trainer", "--epochs", "1")
    assert_clean_error(result, "command not found: no-such-trainer")
    assert_error_manifest(result, "command_not_found")


def test_command_exits_non_zero_shows_the_last_20_log_lines(project: Path) -> None:
    # Its own gate: a training that crashes.
    result = check(project, *script("crash.py"))
    assert_clean_error(result, "run A (deterministic) exited with code 1")
    # The log has 31 lines: the last 20 are epochs 11 to 29 and the error.
    assert "epoch line 11" in result.stdout and "epoch line 29" in result.stdout
    assert "epoch line 10" not in result.stdout
    assert "loss became NaN at step 30" in result.stdout
    manifest = assert_error_manifest(result, "run_failed")
    assert manifest["runs"][0]["exit_code"] == 1
    assert Path(manifest["runs"][0]["log_path"]).read_text().count("epoch line") == 30


def test_timeout_kills_the_whole_process_group(
    project: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its own gate: a training that outlasts the timeout.
    monkeypatch.setenv(MARK, str(project))  # every process of the run inherits it
    result = check(project, "--timeout", "3", *script("sleeper.py"))
    assert_clean_error(result, "run A (deterministic) timed out after")
    manifest = assert_error_manifest(result, "timeout")
    assert manifest["runs"][0]["timed_out"] is True
    assert len((project / "repro-gate-out/runs/A/pids.txt").read_text().split()) == 2
    assert survivors(str(project)) == []


def test_artifact_glob_matching_nothing(project: Path) -> None:
    # Its own gate: a glob no file of run A matches.
    result = check(project, "--artifacts", "checkpoints/*.pt", *script("deterministic.py"))
    assert_clean_error(result, "artifact glob 'checkpoints/*.pt' matched no file in run A",
                       "; the run wrote", "model.pt")
    assert_error_manifest(result, "no_artifacts")


def test_corrupt_checkpoint(project: Path) -> None:
    # Its own gate: a training that writes a checkpoint torch cannot read.
    result = check(project, *script("corrupt_checkpoint.py"))
    assert_clean_error(result, "cannot read checkpoint model.pt")
    assert_error_manifest(result, "checkpoint_unreadable")


def test_output_directory_not_writable(tmp_path: Path) -> None:
    (tmp_path / "occupied").write_text("a file, not a directory")
    result = check(tmp_path, "--output-dir", "occupied/out", "--", sys.executable, "-c", "1")
    assert_clean_error(result, "output directory", "is not writable")


def test_nothing_to_compare(tmp_path: Path) -> None:
    result = check(tmp_path, "--", sys.executable, "-c", "print('no training here')")
    assert_clean_error(result, "nothing to compare")
    assert_error_manifest(result, "nothing_to_compare")


def test_bad_tolerance_flag(tmp_path: Path) -> None:
    assert_clean_error(check(tmp_path, "--tolerance", "loose"), "--tolerance: expected")


def test_env_flag_needs_key_and_value(tmp_path: Path) -> None:
    assert_clean_error(check(tmp_path, "--env", "NOVALUE"), "--env: expected KEY=VALUE")


def test_user_env_reaches_the_training(project: Path) -> None:
    # Its own gate: a training that records its environment, in every kind of run.
    # Its hash seed goes to its log: run B's differs from run A's on purpose.
    (project / "show_env.py").write_text(
        "import os, json\n"
        "path = os.path.join(os.environ['REPRO_GATE_RUN_DIR'], 'env.json')\n"
        "keys = ['MY_FLAG', 'CUBLAS_WORKSPACE_CONFIG', 'REPRO_GATE_MODE']\n"
        "json.dump({k: os.environ.get(k) for k in keys}, open(path, 'w'))\n"
        "print('hash seed', os.environ.get('PYTHONHASHSEED'))\n"
    )
    result = check(project, "--env", "MY_FLAG=on", "--seed", "7", "--noise-floor",
                   *script("show_env.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    runs = {r["name"]: r for r in result.manifest["runs"]}
    assert runs["A"]["artifacts"][0]["path"] == "env.json"
    seen = json.loads((project / "repro-gate-out/runs/A/env.json").read_text())
    # CUBLAS_WORKSPACE_CONFIG is a determinism setting the gate applies whatever `seed` is.
    assert seen == {"MY_FLAG": "on", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
                    "REPRO_GATE_MODE": "deterministic"}
    default = json.loads((project / "repro-gate-out/runs/default/env.json").read_text())
    assert default["REPRO_GATE_MODE"] == "default"
    # The hash seed is each deterministic run's own, fixed and different; the others' the user's.
    logs = project / "repro-gate-out/logs"
    user = os.environ.get("PYTHONHASHSEED")
    assert [hash_seed_line(logs / f"{name}.log") for name in ("A", "B", "default")] == [
        "hash seed 0", "hash seed 1", f"hash seed {user}"]
    assert (runs["A"]["hash_seed"], runs["B"]["hash_seed"]) == ("0", "1")
    assert "hash_seed" not in runs["default"]


def hash_seed_line(log: Path) -> str:
    return next(line for line in log.read_text().splitlines() if line.startswith("hash seed"))
