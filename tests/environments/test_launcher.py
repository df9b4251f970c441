"""Running in an environment: a launcher whose runs find the environment first on PATH (the
inner launcher is the local one; the run is a tiny child of this interpreter)."""

from __future__ import annotations

import sys
from pathlib import Path

from repro_gate.environments.launcher import InEnvironment, python_environment
from repro_gate.environments.virtualenvs import Environment
from repro_gate.launch.base import PythonEnvironment, RunSpec
from repro_gate.launch.local import LocalLauncher


def environment(path: Path, volume: str | None = None) -> Environment:
    return Environment(path / "bin" / "python", "0" * 64, {"numpy": "2.0.1"}, False, path,
                       ("numpy",), volume)


def test_the_launchers_view_of_an_environment_is_its_folder_and_volume(tmp_path: Path) -> None:
    assert python_environment(environment(tmp_path / "env")) == PythonEnvironment(
        tmp_path / "env", None)
    assert python_environment(environment(Path("/opt/env"), "repro-gate-env-1")).volume == (
        "repro-gate-env-1")


def test_runs_use_the_environment_and_keep_the_inner_launchers_name(tmp_path: Path) -> None:
    env_root = tmp_path / "env"
    launcher = InEnvironment(LocalLauncher(), python_environment(environment(env_root)))
    code = "import os; print(os.environ['VIRTUAL_ENV']); print(os.environ['PATH'].split(':')[0])"
    spec = RunSpec("T1", "deterministic", [sys.executable, "-c", code], tmp_path,
                   tmp_path / "runs" / "T1", {}, 20.0, tmp_path / "T1.log", [])
    lines: list[str] = []

    outcome = launcher.run(spec, lines.append)

    assert outcome.exit_code == 0
    assert lines == [str(env_root), str(env_root / "bin")]
    assert spec.python_environment is None  # the caller's spec is left as it was
    assert launcher.name == "local"
    assert launcher.python_executable() == str(env_root / "bin" / "python")
