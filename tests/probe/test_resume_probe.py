"""The probe's side of the resume check, on real tiny trainings run with the probe injected: run
R's first process stops after a checkpoint, the resumed process numbers on, the state records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.gate_cli import TORCHRUN
from helpers.paths import TRAININGS
from helpers.trajectories import without_times

from repro_gate.probe import (
    INJECT_DIR,
    RESUME_POINT_FILE,
    RESUME_STATE_FILE,
    STATUS_FILE,
    STOP_EXIT_CODE,
    probe_output_dir,
    rank_file,
    read_json,
    read_trajectory,
)

TRAINING = "resume_probe_train.py"
Result = subprocess.CompletedProcess[str]


def run(run_dir: Path, *args: str, env: dict[str, str] | None = None,
        script: str = TRAINING, launcher: list[str] | None = None,
        ) -> Result:
    """Run a training in `run_dir` (also its working directory) the way the gate does."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    environ.update(PYTHONPATH=os.pathsep.join([str(INJECT_DIR), str(TRAININGS)]),
                   PYTHONHASHSEED="0", REPRO_GATE_RUN_DIR=str(run_dir),
                   REPRO_GATE_MODE="deterministic", REPRO_GATE_SEED="1234", **(env or {}))
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [*(launcher or [sys.executable]), str(TRAININGS / script), *args]
    return subprocess.run(command, env=environ, cwd=run_dir, capture_output=True, text=True,
                          timeout=240)


def resume_point(run_dir: Path, rank: int = 0) -> Any:
    return read_json(run_dir, RESUME_POINT_FILE, rank)


def steps_of(run_dir: Path, rank: int = 0) -> list[int]:
    return [record["step"] for record in read_trajectory(run_dir, rank)]


def records(run_dir: Path, rank: int = 0) -> list[dict[str, Any]]:
    path = probe_output_dir(run_dir) / rank_file(RESUME_STATE_FILE, rank)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ----- run R's first process: the stop ---------------------------------------------------------


def test_stops_at_the_first_step_after_a_checkpoint_written_at_or_after_the_resume_step(
    tmp_path: Path,
) -> None:
    # Checkpoints at steps 3 and 6: the one at 3 is before step 4 and does not count.
    result = run(tmp_path, "10", "3", "torch", env={"REPRO_GATE_RESUME_AFTER": "4"})
    assert result.returncode == STOP_EXIT_CODE, result.stderr
    assert resume_point(tmp_path) == {"step": 6, "checkpoint": str(tmp_path / "ckpt.pt"),
                                      "paths": [str(tmp_path / "ckpt.pt")], "kind": "torch.save"}
    status = read_json(tmp_path, STATUS_FILE)
    assert (status["stopped"], status["stop_step"], status["errors"]) == ("resume_point", 6, [])
    assert steps_of(tmp_path) == [1, 2, 3, 4, 5, 6]
    assert "step 6 loss" in result.stdout and "step 7" not in result.stdout
    assert records(tmp_path) == []  # only with REPRO_GATE_RESUME_RECORDS=1


def test_a_checkpoint_at_the_resume_step_itself_counts(tmp_path: Path) -> None:
    result = run(tmp_path, "10", "3", "torch", env={"REPRO_GATE_RESUME_AFTER": "3"})
    assert result.returncode == STOP_EXIT_CODE, result.stderr
    assert resume_point(tmp_path)["step"] == 3
    assert steps_of(tmp_path) == [1, 2, 3]


@pytest.mark.parametrize("args", [("8", "3", "torch"), ("8", "3", "none")],
                         ids=["only-before", "never"])
def test_no_checkpoint_followed_by_a_step_leaves_no_resume_point(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # Writes at steps 3 and 6, before step 7 (or none): the training runs to its end.
    result = run(tmp_path, *args, env={"REPRO_GATE_RESUME_AFTER": "7"})
    assert result.returncode == 0, result.stderr
    assert resume_point(tmp_path) is None
    assert read_json(tmp_path, STATUS_FILE)["stopped"] is None
    assert steps_of(tmp_path) == list(range(1, 9))


@pytest.mark.parametrize("how", ["rename", "file"])
def test_write_then_rename_and_an_open_file_report_the_final_path(
    tmp_path: Path, how: str
) -> None:
    result = run(tmp_path, "10", "3", how, env={"REPRO_GATE_RESUME_AFTER": "4"})
    assert result.returncode == STOP_EXIT_CODE, result.stderr
    assert resume_point(tmp_path) == {"step": 6, "checkpoint": str(tmp_path / "ckpt.pt"),
                                      "paths": [str(tmp_path / "ckpt.pt")], "kind": "torch.save"}


def test_safetensors_and_several_files_make_one_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    result = run(tmp_path, "10", "3", "safetensors", env={"REPRO_GATE_RESUME_AFTER": "4"})
    assert result.returncode == STOP_EXIT_CODE, result.stderr
    last = str(tmp_path / "model.safetensors")
    assert resume_point(tmp_path) == {"step": 6, "checkpoint": last,
                                      "paths": [str(tmp_path / "state.pt"), last],
                                      "kind": "safetensors"}


def test_distributed_checkpoint_reports_its_directory(tmp_path: Path) -> None:
    result = run(tmp_path, "10", "3", "dcp", env={"REPRO_GATE_RESUME_AFTER": "4"})
    assert result.returncode == STOP_EXIT_CODE, result.stderr
    last = str(tmp_path / "dcp_ckpt")
    assert resume_point(tmp_path) == {"step": 6, "checkpoint": last,
                                      "paths": [str(tmp_path / "state.pt"), last], "kind": "dcp"}


def test_torchrun_ranks_stop_at_the_same_step_when_rank_0_alone_writes(tmp_path: Path) -> None:
    result = run(tmp_path, "8", "2", script="resume_probe_ddp.py", launcher=TORCHRUN,
                 env={"REPRO_GATE_RESUME_AFTER": "3", "REPRO_GATE_RESUME_RECORDS": "1"})
    point = {"step": 4, "checkpoint": str(tmp_path / "ckpt.pt"),
             "paths": [str(tmp_path / "ckpt.pt")], "kind": "torch.save"}
    for rank in (0, 1):
        status = read_json(tmp_path, STATUS_FILE, rank)
        assert (status["rank"], status["stopped"], status["stop_step"]) == (
            rank, "resume_point", 4), result.stderr
        assert resume_point(tmp_path, rank) == point
        assert steps_of(tmp_path, rank) == [1, 2, 3, 4]
        assert [record["step"] for record in records(tmp_path, rank)] == [1, 2, 3, 4]


# ----- the resumed process: numbering and appending --------------------------------------------


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Run A whole (10 steps) and R's first process, stopped after its checkpoint of step 6, both
    with the records: the directories of A and R."""
    base = tmp_path_factory.mktemp("resume")
    run_a, run_r = base / "a", base / "r"
    records_on = {"REPRO_GATE_RESUME_RECORDS": "1"}
    assert run(run_a, "10", "3", "torch", env=records_on).returncode == 0
    first = run(run_r, "10", "3", "torch", env={**records_on, "REPRO_GATE_RESUME_AFTER": "4"})
    assert first.returncode == STOP_EXIT_CODE, first.stderr
    return run_a, run_r


def resume(stopped: tuple[Path, Path], tmp_path: Path, *args: str) -> tuple[Path, Path, Result]:
    """R's resumed process in a copy of R's directory: A's and R's directories and the resumed
    process's result."""
    run_a, first = stopped
    run_r = tmp_path / "r"
    shutil.copytree(first, run_r)
    point = resume_point(run_r)
    resumed = run(run_r, "10", "3", "torch", *args, env={
        "REPRO_GATE_RESUME_RECORDS": "1", "REPRO_GATE_RESUME_STEP": str(point["step"]),
        "REPRO_GATE_RESUME_AFTER": "4",  # left set: the resumed process never stops for it
        "REPRO_GATE_RESUME_CHECKPOINT": point["checkpoint"]})
    return run_a, run_r, resumed


def test_resumed_process_numbers_on_from_the_checkpoint_and_appends(
    stopped: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, run_r, resumed = resume(stopped, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step 6" in resumed.stdout
    assert steps_of(run_r) == list(range(1, 11))
    assert without_times(read_trajectory(run_r)) == without_times(read_trajectory(run_a))
    status = read_json(run_r, STATUS_FILE)
    assert (status["steps"], status["stopped"], status["errors"]) == (10, None, [])
    assert resume_point(run_r)["step"] == 6  # the first process's, left as it was
    # A resume that restores everything starts each step from A's state.
    assert records(run_r) == records(run_a)
    assert [record["step"] for record in records(run_r)] == list(range(1, 11))


def first_difference(run_a: Path, run_r: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """The first step whose records differ: its number and the differing fields of A and R."""
    for a, r in zip(records(run_a), records(run_r), strict=False):
        assert a["step"] == r["step"]
        if a != r:
            keys = [key for key in a if a[key] != r[key]]
            return a["step"], {k: a[k] for k in keys}, {k: r[k] for k in keys}
    raise AssertionError("no record differs")


def test_resumed_process_is_matched_with_run_a_by_step_number_and_records_the_generator(
    stopped: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, run_r, resumed = resume(stopped, tmp_path, "--forget", "numpy")
    assert resumed.returncode == 0, resumed.stderr
    assert steps_of(run_r) == list(range(1, 11))
    step, in_a, in_r = first_difference(run_a, run_r)
    assert (step, list(in_a)) == (7, ["rng"])
    assert [k for k in in_a["rng"] if in_a["rng"][k] != in_r["rng"][k]] == ["numpy"]


@pytest.mark.parametrize(("forget", "field"), [("lr", "hyper"), ("buffers", "buffers")])
def test_a_state_not_restored_shows_first_in_its_own_record(
    stopped: tuple[Path, Path], tmp_path: Path, forget: str, field: str
) -> None:
    run_a, run_r, _ = resume(stopped, tmp_path, "--forget", forget)
    step, in_a, _ = first_difference(run_a, run_r)
    assert step >= 7 and list(in_a) == [field], in_a


# ----- the records -----------------------------------------------------------------------------


def test_records_only_with_the_variable_and_the_same_for_the_same_training(
    stopped: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, _ = stopped
    again = run(tmp_path / "again", "4", "3", "none", env={"REPRO_GATE_RESUME_RECORDS": "1"})
    assert again.returncode == 0, again.stderr
    assert records(tmp_path / "again") == records(run_a)[:4]
    first = records(run_a)[0]
    assert first["hyper"] == [{"lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-08,
                               "weight_decay": 0, "initial_lr": 0.01}]
    assert first["optimizer_state"] is None  # Adam has no state before its first step
    assert records(run_a)[1]["optimizer_state"] is not None
    assert first["grad_scale"] is None and first["rng"]["cuda"] is None
    assert all(len(first["rng"][name]) == 16 for name in ("torch", "numpy", "random"))
    plain = run(tmp_path / "plain", "2", "3", "none")
    assert plain.returncode == 0, plain.stderr
    assert not (probe_output_dir(tmp_path / "plain") / RESUME_STATE_FILE).exists()


@pytest.mark.parametrize(("args", "field"), [(["--lr", "0.02"], "hyper"),
                                             (["--numpy-seed", "1"], "rng")])
def test_records_differ_where_the_training_differs(
    stopped: tuple[Path, Path], tmp_path: Path, args: list[str], field: str
) -> None:
    run_a, _ = stopped
    other = run(tmp_path, "1", "3", "none", *args, env={"REPRO_GATE_RESUME_RECORDS": "1"})
    assert other.returncode == 0, other.stderr
    step, in_a, _ = first_difference(run_a, tmp_path)
    assert (step, list(in_a)) == (1, [field])


def test_records_hold_the_gradient_scale(tmp_path: Path) -> None:
    result = run(tmp_path, "2", "3", "none", "--scaler", env={"REPRO_GATE_RESUME_RECORDS": "1"})
    assert result.returncode == 0, result.stderr
    assert [record["grad_scale"] for record in records(tmp_path)] == [1024.0, 1024.0]
