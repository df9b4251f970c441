"""The probe leaves the training as it was: the same checkpoint bytes and the same output.

Each training of tests/transparency/trainings/ seeds itself and is run twice, once as the user
runs it and once with the probe loaded as the gate loads it (its sitecustomize on PYTHONPATH,
the gate's variables for a deterministic run). Both must write byte-identical files and print
the same lines; the probe must have recorded the training's steps. The trainings do what the
probe could disturb: save the whole model (`torch.save(model)`, pickle), deep-copy it (EMA,
`AveragedModel`), register and count hooks, and start DataLoader workers by fork and by spawn.
The language model is also gated as a user would gate it, through `repro-gate check`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import check, script

from repro_gate.probe import INJECT_DIR, STATUS_FILE, read_json, read_trajectory

TRAININGS = Path(__file__).parent / "trainings"
# The variables the gate gives a deterministic run (gate/training_run.py), as they are today.
GATE_ENV = {"REPRO_GATE_MODE": "deterministic", "REPRO_GATE_DETERMINISM": "warn",
            "PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
CASES = {
    "whole_model": ["whole_model.py"],
    "ema_deepcopy": ["ema_deepcopy.py"],
    "averaged_model": ["averaged_model.py"],
    "user_hooks": ["user_hooks.py"],
    "hook_counter": ["hook_counter.py"],
    "workers_fork": ["workers.py", "fork"],
    "workers_spawn": ["workers.py", "spawn"],
    "word_language_model": ["word_language_model.py"],
}


def run(project: Path, argv: list[str], name: str, probe: bool) -> tuple[str, dict[str, str]]:
    """Run the training, its checkpoints into a folder of their own: its stdout and the
    sha256 of every file it wrote."""
    out = project / name
    out.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("REPRO_GATE_") and k != "PYTHONPATH"}
    env["PYTHONHASHSEED"] = "0"  # the training's set order is not what is tested here
    if probe:
        env.update(GATE_ENV, PYTHONPATH=str(INJECT_DIR),
                   REPRO_GATE_RUN_DIR=str(project / f"{name}-run"))
    done = subprocess.run([sys.executable, argv[0], str(out), *argv[1:]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    digests = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
               for path in sorted(out.iterdir())}
    return training_lines(done.stdout), digests


def training_lines(stdout: str) -> str:
    """The training's output, the gate's own lines aside."""
    return "\n".join(line for line in stdout.splitlines() if not line.startswith("repro-gate"))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_the_probe_changes_neither_the_checkpoints_nor_the_output(tmp_path: Path,
                                                                  case: str) -> None:
    shutil.copytree(TRAININGS, tmp_path, dirs_exist_ok=True)
    argv = CASES[case]
    plain_stdout, plain_files = run(tmp_path, argv, "plain", probe=False)
    gated_stdout, gated_files = run(tmp_path, argv, "gated", probe=True)
    assert plain_files and gated_files == plain_files
    assert gated_stdout == plain_stdout
    status = read_json(tmp_path / "gated-run", STATUS_FILE)
    assert status["errors"] == [] and status["steps"] > 0, status
    trajectory = read_trajectory(tmp_path / "gated-run")
    assert len(trajectory) == status["steps"]
    assert all(record["inputs"] and record["outputs"] for record in trajectory)


@pytest.mark.slow
def test_a_language_model_that_saves_itself_whole_passes_the_gate(tmp_path: Path) -> None:
    shutil.copytree(TRAININGS, tmp_path, dirs_exist_ok=True)
    saves = tmp_path / "saves"
    saves.mkdir()
    _, plain_files = run(tmp_path, CASES["word_language_model"], "plain", probe=False)
    result = check(tmp_path, "--no-cost", *script("word_language_model.py"), str(saves))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.manifest["verdict"] == "pass"
    assert all(run["steps"] > 0 for run in result.manifest["runs"])
    # It saved into the working directory by its absolute path: that lands in run B's own
    # working copy, never in the user's tree.
    run_b = next(run for run in result.manifest["runs"] if run["name"] == "B")
    saved = Path(run_b["run_dir"]) / "work" / saves.name / "model.pt"
    assert not (saves / "model.pt").exists()
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()
    assert {"model.pt": digest} == plain_files  # what run B saved, byte for byte
