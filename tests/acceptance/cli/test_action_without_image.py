"""The action without `image:` runs the training in its own image: a Python training whose
interpreter there cannot import torch is refused before any run. The action's interpreter
without torch is a real virtual environment first on PATH, as `python` is in the image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import TRAININGS

from repro_gate.errors import EXIT_ERROR

TRAIN = "import torch\nfrom tiny import run_dir_path, train\n\ntorch.manual_seed(7)\n" \
        "train(steps=3, checkpoint=run_dir_path('model.pt'))\n"


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a virtual environment that has no torch."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    probe = subprocess.run([venv / "bin" / "python", "-c", "import torch"], check=False,
                           capture_output=True)
    assert probe.returncode != 0, "the bare environment imports torch"
    return venv / "bin"


def action(workspace: Path, path_first: Path, command: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    env = {
        **base,
        "PATH": f"{path_first}{os.pathsep}{base.get('PATH', os.defpath)}",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(workspace.parent / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(workspace.parent / "summary.md"),
        "INPUT_COMMAND": command,
    }
    return subprocess.run([sys.executable, "-m", "repro_gate", "action"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    shutil.copy(TRAININGS / "tiny.py", path / "tiny.py")
    (path / "train.py").write_text(TRAIN)
    (path / ".repro-gate.yml").write_text("cost:\n  enabled: false\n")
    return path


@pytest.mark.parametrize("command", ["python train.py", "python3 -u train.py"])
def test_a_python_training_without_torch_is_refused_before_any_run(
    workspace: Path, python_without_torch: Path, command: str
) -> None:
    completed = action(workspace, python_without_torch, command)

    assert completed.returncode == EXIT_ERROR, completed.stdout + completed.stderr
    line = completed.stderr.strip().splitlines()[-1]
    assert line.startswith("repro-gate: error: `python"), completed.stderr
    assert "set the input `image`" in line
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["verdict"] == "error" and manifest["runs"] == []
    assert [reason["code"] for reason in manifest["reasons"]] == ["image_required"]
    assert list((workspace / "repro-gate-out" / "runs").glob("*")) == []


def test_the_check_asks_the_interpreter_the_training_starts_with(
    workspace: Path, python_without_torch: Path
) -> None:
    # `python` on PATH has no torch, but the command names an interpreter that has it.
    completed = action(workspace, python_without_torch, f"{sys.executable} train.py")

    assert completed.returncode == 0, completed.stdout + completed.stderr
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["verdict"] == "pass"
