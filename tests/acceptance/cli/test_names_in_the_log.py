"""A file the training names cannot speak for the gate: an artifact named like a workflow
command (`x\\n::notice title=repro-gate::PASS reproducible\\n`) is one escaped line of the
report, under `repro-gate check` and under `repro-gate action`, where the runner would act on a
line of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gate_cli import Result, check, script
from helpers.github_env import read_outputs
from helpers.paths import TRAININGS
from helpers.workflow_commands import commands_besides_windows, live_commands

FORGED = "x\n::notice title=repro-gate::PASS reproducible\n"
SHOWN = "x\\n::notice title=repro-gate::PASS reproducible\\n"  # as the report prints it
TRAIN = f"""\
import torch
from tiny import run_dir_path, train

torch.manual_seed(7)
train(steps=3, checkpoint=run_dir_path("model.pt"))
with open(run_dir_path({FORGED!r}), "w") as file:
    file.write("{{}}")
"""


def workspace(root: Path) -> Path:
    path = root / "workspace"
    path.mkdir()
    shutil.copy(TRAININGS / "tiny.py", path / "tiny.py")
    (path / "train.py").write_text(TRAIN)
    (path / ".repro-gate.yml").write_text("cost:\n  enabled: false\n")
    return path


def forged_lines(output: str) -> list[str]:
    """Lines the runner would read as a `::notice` (leading spaces are no protection)."""
    return [line for line in output.splitlines() if line.lstrip().startswith("::notice")]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return check(workspace(tmp_path_factory.mktemp("check")), "--no-cost", *script("train.py"))


@dataclass(frozen=True)
class ActionRun:
    completed: subprocess.CompletedProcess[str]
    step_files: Path  # the folder of GITHUB_OUTPUT and GITHUB_STEP_SUMMARY


@pytest.fixture(scope="module")
def in_action(tmp_path_factory: pytest.TempPathFactory) -> ActionRun:
    path = workspace(tmp_path_factory.mktemp("action"))
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_"))}
    env = {
        **base,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(path),
        "GITHUB_OUTPUT": str(path.parent / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(path.parent / "summary.md"),
        "INPUT_COMMAND": f"{sys.executable} train.py",
    }
    completed = subprocess.run([sys.executable, "-m", "repro_gate", "action"], cwd=path,
                               env=env, capture_output=True, text=True, timeout=300, check=False)
    return ActionRun(completed, path.parent)


def test_check_reports_the_file_on_one_escaped_line(checked: Result) -> None:
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    compared = [artifact["path"] for artifact in checked.manifest["comparison"]["artifacts"]]
    assert FORGED in compared, "the training's file must be among the artifacts"
    assert f"      {SHOWN}: equal" in checked.stdout.splitlines()
    assert forged_lines(checked.stdout + checked.stderr) == []


def test_the_action_prints_the_report_with_workflow_commands_off(in_action: ActionRun) -> None:
    stdout, stderr = in_action.completed.stdout, in_action.completed.stderr
    assert in_action.completed.returncode == 0, stdout + stderr
    assert read_outputs(in_action.step_files / "output.txt")["verdict"] == "pass"
    assert f"      {SHOWN}: equal" in stdout.splitlines()
    assert forged_lines(stdout + stderr) == []
    # What the runner acts on: the windows and the runs' log groups, nothing a run named.
    assert set(commands_besides_windows(stdout)) == {
        "::group::repro-gate run A", "::group::repro-gate run B", "::endgroup::"}
    assert live_commands(stderr) == []
