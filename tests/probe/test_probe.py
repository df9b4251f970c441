"""The injected probe and the reference training, exercised through real training subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import ROOT, SCRIPTS
from helpers.trajectories import without_times

from repro_gate.probe import (
    ALERTS_FILE,
    INJECT_DIR,
    STATUS_FILE,
    STOP_EXIT_CODE,
    TRAJECTORY_FILE,
    probe_output_dir,
    read_json,
    read_trajectory,
)

REFERENCE_DIR = ROOT / "src" / "repro_gate" / "reference"


def run_training(
    script: str,
    run_dir: Path | None,
    mode: str = "deterministic",
    extra_env: dict[str, str] | None = None,
    pythonpath: list[Path] | None = None,
    args: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of the test scripts the way the gate runs a training command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (pythonpath or [INJECT_DIR]))
    env["PYTHONHASHSEED"] = "0"
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        env.update(REPRO_GATE_RUN_DIR=str(run_dir), REPRO_GATE_MODE=mode, REPRO_GATE_SEED="1234")
    env.update(extra_env or {})
    command = [sys.executable, str(SCRIPTS / script), *(args or [])]
    return subprocess.run(
        command, env=env, cwd=run_dir or SCRIPTS, capture_output=True, text=True, timeout=180
    )


def line_of(script: str, marker: str) -> int:
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if marker in text)


def test_deterministic_runs_of_unseeded_training_match_and_default_runs_do_not(
    tmp_path: Path,
) -> None:
    trajectories = {}
    for name, mode in [("a", "deterministic"), ("b", "deterministic"), ("c", "default")]:
        result = run_training("train_unseeded.py", tmp_path / name, mode)
        assert result.returncode == 0, result.stderr
        trajectories[name] = without_times(read_trajectory(tmp_path / name))
    assert len(trajectories["a"]) == 5
    assert trajectories["a"] == trajectories["b"]
    assert trajectories["c"][0]["params"] != trajectories["a"][0]["params"]
    status = read_json(tmp_path / "c", STATUS_FILE)
    assert status == {
        "probe": "ok",
        "pid": status["pid"],  # the process that stepped: rank 0 of 1 here
        "rank": 0,
        "world_size": 1,
        "mode": "default",
        "steps": 5,
        "stopped": None,
        "stop_step": None,
        "errors": [],
    }


def test_steps_name_parameters_in_model_order_and_keep_exact_loss(tmp_path: Path) -> None:
    result = run_training("train_unseeded.py", tmp_path)
    assert result.returncode == 0, result.stderr
    steps = read_trajectory(tmp_path)
    assert [step["step"] for step in steps] == [1, 2, 3, 4, 5]
    assert list(steps[0]["params"]) == [
        "encoder.0.weight",
        "encoder.0.bias",
        "head.weight",
        "head.bias",
        "param_group2.0",
    ]
    assert all(len(d) == 16 and int(d, 16) >= 0 for d in steps[-1]["params"].values())
    assert steps[1]["params"]["head.weight"] != steps[0]["params"]["head.weight"]
    printed_loss = result.stdout.split("last loss ")[1].split()[0]
    assert steps[-1]["loss"] == printed_loss
    assert all(isinstance(step["time"], float) and step["time"] >= 0 for step in steps)


def test_nondeterministic_op_is_counted_at_the_users_line(tmp_path: Path) -> None:
    result = run_training("nondeterministic_put.py", tmp_path)
    assert result.returncode == 0, result.stderr
    alerts = read_json(tmp_path, ALERTS_FILE)
    assert alerts == [
        {
            "op": "put_",
            "file": str(SCRIPTS / "nondeterministic_put.py"),
            "line": line_of("nondeterministic_put.py", "PUT_LINE"),
            "count": 3,
            "kind": "nondeterministic_op",
            "message": alerts[0]["message"],
            "steps": [1],  # before any optimizer step: step 1 is in progress
        }
    ]
    assert alerts[0]["message"].startswith("put_ does not have a deterministic implementation")
    assert result.stderr.count("does not have a deterministic implementation") == 1


def test_strict_mode_records_the_error_at_the_users_line(tmp_path: Path) -> None:
    result = run_training(
        "nondeterministic_put.py", tmp_path, extra_env={"REPRO_GATE_DETERMINISM": "strict"}
    )
    assert result.returncode == 1
    assert "RuntimeError: put_ does not have a deterministic implementation" in result.stderr
    alerts = read_json(tmp_path, ALERTS_FILE)
    assert [(a["op"], a["line"], a["count"], a["kind"]) for a in alerts] == [
        ("put_", line_of("nondeterministic_put.py", "PUT_LINE"), 1, "strict_error")
    ]
    assert alerts[0]["file"] == str(SCRIPTS / "nondeterministic_put.py")


def test_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    marker = tmp_path / "marker.txt"
    (theirs / "sitecustomize.py").write_text(
        f"open({str(marker)!r}, 'w').write('user sitecustomize ran')\n"
    )
    result = run_training("probe_state.py", tmp_path / "run", pythonpath=[INJECT_DIR, theirs])
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "user sitecustomize ran"
    # The probe is loaded too, and deterministic mode switched torch's knobs on.
    assert json.loads(result.stdout) == {
        "probe_loaded": True,
        "deterministic": True,
        "backward_wrapped": True,
    }
    assert read_json(tmp_path / "run", STATUS_FILE)["mode"] == "deterministic"


def test_probe_does_nothing_without_a_run_directory(tmp_path: Path) -> None:
    result = run_training("probe_state.py", None)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "probe_loaded": False,
        "deterministic": False,
        "backward_wrapped": False,
    }
    assert not (SCRIPTS / ".repro-gate").exists()


def test_max_steps_stops_cleanly(tmp_path: Path) -> None:
    result = run_training("train_unseeded.py", tmp_path, extra_env={"REPRO_GATE_MAX_STEPS": "2"})
    assert result.returncode == STOP_EXIT_CODE
    assert "last loss" not in result.stdout
    assert [step["step"] for step in read_trajectory(tmp_path)] == [1, 2]
    status = read_json(tmp_path, STATUS_FILE)
    assert (status["stopped"], status["stop_step"]) == ("max_steps", 2)


def test_dataloader_workers_do_not_touch_the_files(tmp_path: Path) -> None:
    result = run_training("dataloader_workers.py", tmp_path)
    assert result.returncode == 0, result.stderr
    steps = read_trajectory(tmp_path)
    assert [step["step"] for step in steps] == list(range(1, 9))
    status = read_json(tmp_path, STATUS_FILE)
    assert (status["steps"], status["errors"]) == (8, [])
    assert sorted(p.name for p in probe_output_dir(tmp_path).iterdir()) == sorted(
        {ALERTS_FILE, STATUS_FILE, TRAJECTORY_FILE} | _fingerprint_file(tmp_path)
    )


def _fingerprint_file(run_dir: Path) -> set[str]:
    # Written only when the fingerprint module ships next to the probe.
    has_module = (INJECT_DIR / "_repro_gate_fingerprint.py").is_file()
    return {"fingerprint.json"} if has_module else set()


def test_reference_training_writes_a_checkpoint_and_metrics(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(REFERENCE_DIR), str(INJECT_DIR)]),
        REPRO_GATE_RUN_DIR=str(tmp_path),
        REPRO_GATE_MODE="deterministic",
        REPRO_GATE_SEED="7",
    )
    result = subprocess.run(
        [sys.executable, "-m", "repro_gate_reference", "--steps", "4", "--device", "cpu"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    checkpoint = torch.load(tmp_path / "model.pt", weights_only=True)
    assert set(checkpoint) == {"model", "optimizer"}
    assert "embedding.weight" in checkpoint["model"]
    assert "conv.weight" in checkpoint["model"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (metrics["steps"], metrics["seed"]) == (4, 7)
    steps = read_trajectory(tmp_path)
    assert len(steps) == 4
    assert steps[-1]["loss"] == float.hex(metrics["final_loss"])


# The digest's formula and guarantees are tested in tests/probe/test_digest.py.


def test_each_step_records_its_inputs_loss_gradients_and_parameters(tmp_path: Path) -> None:
    # The expected digests are computed in the training itself with the probe's digest: the
    # records hold the model's batch (not the loss module's arguments, not the no_grad call),
    # the gradients before the update, the parameters after it, and at step 1 the initial ones.
    result = run_training("step_records.py", tmp_path, args=[str(tmp_path)])
    assert result.returncode == 0, result.stderr
    expected = json.loads((tmp_path / "expected.json").read_text())
    steps = read_trajectory(tmp_path)
    assert [step["step"] for step in steps] == [1, 2, 3]
    for step, wanted in zip(steps, expected, strict=True):
        assert {key: step.get(key) for key in wanted} == wanted
    assert "init" not in steps[1]
    assert len({step["inputs"] for step in steps}) == 3
