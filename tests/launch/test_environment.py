"""The process environment of a local run: the gate's own, minus its credentials, plus the run's
variables and paths."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from repro_gate.launch.base import PythonEnvironment, RunSpec
from repro_gate.launch.environment import build_environment
from repro_gate.launch.shell_assignments import GATE_PYTHONPATH
from repro_gate.probe import ENV_RUN_DIR

BASE = {"PATH": "/usr/bin", "HOME": "/home/u", "GITHUB_TOKEN": "ghs_secret_value",
        "COPY_OF_TOKEN": "ghs_secret_value", "HF_TOKEN": "hf_user",
        "CUDA_VISIBLE_DEVICES": "0"}


def spec(tmp_path: Path, **extra: Any) -> RunSpec:
    base = RunSpec(
        name="A", mode="deterministic", argv=["python", "train.py"], workdir=tmp_path,
        run_dir=tmp_path / "runs" / "A", env={"REPRO_GATE_MODE": "deterministic"}, timeout=None,
        log_path=tmp_path / "A.log", python_path=[tmp_path / "inject", tmp_path / "reference"])
    return dataclasses.replace(base, **extra)


def test_the_gates_credentials_stay_out_and_the_users_variables_pass(tmp_path: Path) -> None:
    env = build_environment(BASE, spec(tmp_path))

    assert "GITHUB_TOKEN" not in env and "COPY_OF_TOKEN" not in env
    assert (env["HF_TOKEN"], env["CUDA_VISIBLE_DEVICES"], env["PATH"]) == (
        "hf_user", "0", "/usr/bin")
    assert env["REPRO_GATE_MODE"] == "deterministic"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_the_run_directory_and_the_probe_come_first_on_pythonpath(tmp_path: Path) -> None:
    env = build_environment({**BASE, "PYTHONPATH": "/user/lib"}, spec(tmp_path))

    assert env[ENV_RUN_DIR] == str(tmp_path / "runs" / "A")
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "inject"), str(tmp_path / "reference"), "/user/lib"]
    # The gate's folders alone, for a command string's own PYTHONPATH assignments.
    assert env[GATE_PYTHONPATH].split(os.pathsep) == [
        str(tmp_path / "inject"), str(tmp_path / "reference")]


def test_no_variable_of_a_run_names_another_runs_folder(tmp_path: Path) -> None:
    env = build_environment(BASE, spec(tmp_path))

    named = {name for name, value in env.items() if str(tmp_path / "runs") in value}
    assert named == {ENV_RUN_DIR}
    assert env[ENV_RUN_DIR] == str(tmp_path / "runs" / "A")


def test_a_python_environment_is_first_on_path_and_pythonhome_goes(tmp_path: Path) -> None:
    venv = PythonEnvironment(tmp_path / "env")

    env = build_environment({**BASE, "PYTHONHOME": "/opt/py"},
                            spec(tmp_path, python_environment=venv))

    assert env["PATH"] == f"{tmp_path / 'env' / 'bin'}{os.pathsep}/usr/bin"
    assert env["VIRTUAL_ENV"] == str(tmp_path / "env")
    assert "PYTHONHOME" not in env
    assert "PYTHONHOME" not in build_environment(
        {"PYTHONHOME": "/opt/py"}, spec(tmp_path, python_environment=venv))


def test_the_base_environment_is_left_unchanged(tmp_path: Path) -> None:
    base = dict(BASE)

    build_environment(base, spec(tmp_path))

    assert base == BASE
