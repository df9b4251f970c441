"""The localisation run names the module a forward divergence starts in.

Through the real `repro-gate check` on real tiny trainings: a module adding OS entropy is named,
entropy added in the training loop names none, a crashed localisation run changes nothing but
its own status, and gates that pass or fail for another cause start no such run. The probe's
localiser is also run on its own, the way the gate starts run L, to show what it must not take
for the divergent module (a seeded dropout, in-place activations) and that the training it
watches is not disturbed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.gate_cli import check, script
from helpers.trajectories import without_times

from repro_gate import validation
from repro_gate.probe import (
    ENV_LOCALISE_STEP,
    INJECT_DIR,
    LOCALISE_FILE,
    read_json,
    read_trajectory,
)


def forward_divergence(project: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check a training expected to diverge in the forward pass at step 3; the manifest and its
    first divergence."""
    result = check(project, "--no-cost", *args)
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    divergence = manifest["comparison"]["first_divergence"]
    assert (divergence["step"], divergence["cause"], divergence["runs"]) == (3, "forward",
                                                                             ["A", "B"])
    assert manifest["verdict"] == "fail"
    return manifest, divergence


def train_under_probe(project: Path, name: str, *args: str, **env: str) -> Path:
    """Run a training with the probe as the gate runs it, deterministic; its run directory."""
    run_dir = project / "runs" / "-".join((name, *args, *env.values()))
    run_dir.mkdir(parents=True)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    environment.update(PYTHONPATH=str(INJECT_DIR), REPRO_GATE_RUN_DIR=str(run_dir),
                       REPRO_GATE_MODE="deterministic", REPRO_GATE_SEED="0", **env)
    done = subprocess.run([sys.executable, name, *args], cwd=project, env=environment,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode in (0, 86), done.stderr  # 86: the probe stopped it at max steps
    return run_dir


def localise(project: Path, variant: str) -> Any:
    """What the localiser finds at step 3 of `localise_noisy_module.py <variant>`."""
    run_dir = train_under_probe(project, "localise_noisy_module.py", variant,
                                REPRO_GATE_MAX_STEPS="3", **{ENV_LOCALISE_STEP: "3"})
    return read_json(run_dir, LOCALISE_FILE)


def test_a_module_adding_entropy_is_named_by_the_localisation_run(project: Path) -> None:
    # Its own gate: the variant whose module adds the entropy.
    manifest, divergence = forward_divergence(
        project, *script("localise_noisy_module.py"), "plain")
    assert divergence["module"] == "body.1"
    localisation = divergence["localisation"]
    assert (localisation["status"], localisation["run"]) == ("found", "L")
    assert "`body.1` (Noisy)" in localisation["note"]
    run_l = manifest["runs"][-1]
    assert [r["name"] for r in manifest["runs"]] == ["A", "B", "L"]
    assert (run_l["purpose"], run_l["mode"], run_l["stopped"], run_l["steps"]) == (
        "localisation", "deterministic", "max_steps", 3)
    assert Path(run_l["log_path"]).name == "L.log"
    assert Path(run_l["log_path"]).is_file()
    # Run L is not one of the compared runs, nor a source of the in-process fingerprint.
    assert manifest["comparison"]["trajectory"]["steps"] == {"A": 6, "B": 3}
    assert set(manifest["fingerprint"]["in_process"]["runs"]) == {"A", "B"}
    assert "body.1" in manifest["reasons"][0]["message"]


def test_entropy_added_outside_the_modules_names_no_module(project: Path) -> None:
    # Its own gate: the training that adds its entropy in the loss.
    _, divergence = forward_divergence(project, *script("localise_noisy_loss.py"))
    assert divergence["module"] is None
    localisation = divergence["localisation"]
    assert (localisation["status"], localisation["run"]) == ("not_found", "L")
    assert "outside the modules" in localisation["note"]


def test_a_crashed_localisation_run_leaves_the_verdict_alone(
    project: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its own gate: the training whose third process (run L) crashes.
    monkeypatch.setenv("LAUNCHES_FILE", str(project.parent / f"{project.name}.launches"))
    manifest, divergence = forward_divergence(
        project, *script("localise_crash_third_run.py"))
    assert divergence["module"] is None
    localisation = divergence["localisation"]
    assert (localisation["status"], localisation["run"]) == ("failed", "L")
    assert "exited with code 1" in localisation["note"]
    assert "\n" not in localisation["note"]
    assert manifest["runs"][-1]["purpose"] == "localisation"
    assert manifest["reasons"][0]["code"] == "trajectory_diverged"


def test_a_passing_gate_starts_no_localisation_run(project: Path) -> None:
    # Its own gate: the variant without entropy, which reproduces.
    result = check(project, "--no-cost", *script("localise_noisy_module.py"), "quiet")
    manifest = result.manifest
    assert manifest["verdict"] == "pass", result.stdout + result.stderr
    assert [r["name"] for r in manifest["runs"]] == ["A", "B"]
    assert not (project / "repro-gate-out" / "logs" / "L.log").exists()
    assert manifest["comparison"]["first_divergence"] is None


def test_a_backward_divergence_whose_modules_all_reproduce_stays_backward(project: Path) -> None:
    # Its own gate. Noise added to a gradient after backward(): run L finds every module
    # reproducible.
    result = check(project, "--no-cost", *script("urandom_noise.py"))
    manifest = result.manifest
    assert manifest["verdict"] == "fail", result.stdout + result.stderr
    assert validation.errors("manifest", manifest) == []
    assert [(r["name"], r.get("purpose")) for r in manifest["runs"]] == [
        ("A", None), ("B", None), ("L", "localisation")]
    divergence = manifest["comparison"]["first_divergence"]
    assert (divergence["cause"], divergence["gradients"]) == ("backward", ["head.bias"])
    assert "localisation" not in divergence and "module" not in divergence


def test_a_tiny_change_of_a_module_output_is_named_forward_every_time(project: Path) -> None:
    # From step 5 `body.1` adds a constant in [0, 1e-7) from os.urandom; the loss rounds to the
    # same bits in both runs. Each gate must name the forward pass and the module, whether the
    # model's output showed the change or only the gradients did. Three gates of one training on
    # purpose: each draws other noise, and which of the two shows it is chance.
    for _ in range(3):
        result = check(project, "--no-cost", *script("cause_tiny_forward.py"))
        assert result.exit_code == 1, result.stdout + result.stderr
        manifest = result.manifest
        assert validation.errors("manifest", manifest) == []
        divergence = manifest["comparison"]["first_divergence"]
        assert divergence["step"] >= 5 and divergence["loss_differs"] is False, divergence
        assert (divergence["cause"], divergence["module"]) == ("forward", "body.1"), divergence
        assert divergence["localisation"]["status"] == "found"
        assert "`body.1` (TinyNoise)" in divergence["localisation"]["note"]


@pytest.mark.parametrize(
    ("variant", "module", "kind"),
    [
        ("dropout", "body.2", "Noisy"),  # the dropout before it draws the same mask again
        ("inplace", "body.4", "Noisy"),  # LeakyReLU and ReLU changed their input in place
        ("root", "", "Net"),  # the outermost module's own code, outside its submodules
    ],
)
def test_the_localiser_replays_what_a_module_started_from(
    project: Path, variant: str, module: str, kind: str
) -> None:
    found = localise(project, variant)
    assert found["step"] == 3
    assert (found["module"], found["class"], found["errors"]) == (module, kind, [])
    assert found["checked"] >= 4


def test_the_localiser_does_not_disturb_the_training(project: Path) -> None:
    """With the localiser on at step 3 of 6, steps and checkpoint (buffers included) are bitwise
    those of the training without it, and nothing is found: not even in `Warmup`, whose output
    depends on the count and the buffer its forward updates (run again from where it started)."""
    quiet = ("localise_noisy_module.py", "quiet")
    plain = train_under_probe(project, *quiet)
    watched = train_under_probe(project, *quiet, **{ENV_LOCALISE_STEP: "3"})
    found = read_json(watched, LOCALISE_FILE)
    assert (found["step"], found["module"], found["errors"]) == (3, None, [])
    assert without_times(read_trajectory(watched)) == without_times(read_trajectory(plain))
    assert len(read_trajectory(plain)) == 6
    first, second = (torch.load(d / "model.pt") for d in (plain, watched))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert {"body.1.running_mean", "body.3.seen"} <= first.keys()
    assert first["body.3.seen"].item() == 6
