"""`repro-gate check` on real multi-process trainings: torchrun and mp.spawn, gloo on CPU."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers.gate_cli import TORCHRUN, check

from repro_gate import validation
from repro_gate.probe import TRAJECTORY_FILE, probe_output_dir, rank_file, read_trajectories

DDP_PARAMETERS = [f"module.{name}" for name in
                  ("encoder.weight", "encoder.bias", "head.weight", "head.bias")]


def test_deterministic_torchrun_ddp_passes_with_both_ranks_compared(project: Path) -> None:
    # Its own gate: a deterministic training under torchrun.
    result = check(project, "--no-cost", "--", *TORCHRUN, "torchrun_ddp.py")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["comparison"]["trajectory"] == {
        "steps_compared": 5, "status": "equal", "steps": {"A": 5, "B": 5}, "ranks": 2}
    assert [(r["steps"], r["ranks"]) for r in manifest["runs"]] == [(5, 2), (5, 2)]
    probe_dir = probe_output_dir(Path(manifest["runs"][0]["run_dir"]))
    assert (probe_dir / rank_file(TRAJECTORY_FILE, 1)).is_file()
    # Every step of both ranks carries the evidence a cause needs: gradients and the input batch.
    for records in read_trajectories(Path(manifest["runs"][0]["run_dir"])).values():
        assert all(all(r["grads"].values()) and r["inputs"] for r in records), records
    assert manifest["fingerprint"]["random"]["distributed"]["world_size"] == 2
    assert manifest["fingerprint"]["random"]["distributed"]["backend"] == "gloo"
    assert "5 steps on each of 2 ranks" in result.stdout


def test_torchrun_rank1_noise_fails_on_rank_1_at_step_3(project: Path) -> None:
    # Its own gate: a training under torchrun whose rank 1 adds noise.
    result = check(project, "--no-cost", "--", *TORCHRUN, "torchrun_rank1_noise.py")
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    divergence = manifest["comparison"]["first_divergence"]
    assert (divergence["rank"], divergence["step"]) == (1, 3)
    assert divergence["runs"] == ["A", "B"]
    assert manifest["runs"][1]["stopped"] == "divergence"  # fail-fast, on rank 1
    assert manifest["reasons"][0]["message"].startswith("rank 1's input differs at step 3")
    assert "first divergence: rank 1, step 3" in result.stdout


def test_mp_spawn_ddp_is_observed_on_both_ranks(project: Path) -> None:
    # Its own gate: a training started by mp.spawn.
    result = check(project, "--no-cost", "--", sys.executable, "spawn_ddp.py")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    trajectory = manifest["comparison"]["trajectory"]
    assert (trajectory["status"], trajectory["ranks"], trajectory["steps"]) == (
        "equal", 2, {"A": 5, "B": 5})
    divergence_free = manifest["comparison"]["first_divergence"] is None
    assert divergence_free
    run_dir = Path(manifest["runs"][0]["run_dir"])
    first = (probe_output_dir(run_dir) / TRAJECTORY_FILE).read_text().splitlines()[0]
    assert all(name in first for name in DDP_PARAMETERS)
