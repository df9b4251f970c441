"""`repro-gate check --resume-after`: run R stops after a checkpoint, is resumed from it and must
continue as run A did; a resume that forgets a state is named by it, with its fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.gate_cli import TORCHRUN, assert_one_line_error, check

from repro_gate import validation
from repro_gate.compare.missing_state import sentence

RESUME = ("--no-cost", "-a", "model.pt", "--resume-after", "2")
TRAINING = ("--", sys.executable, "resume_train.py")


def test_a_training_that_restores_everything_resumes_the_same(project: Path) -> None:
    # Its own gate: the one resume through --resume-command, and the one that restores all.
    result = check(project, *RESUME, "--resume-command",
                   f"{sys.executable} resume_train.py && echo resumed-by-the-resume-command",
                   *TRAINING)
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    resume = manifest["comparison"]["resume"]
    assert resume["status"] == "same", resume
    assert resume["resume_step"] == 2
    # The path the run saw (the workdir's own through its overlay); the file is in its layer.
    assert resume["checkpoint"].endswith("/checkpoints/last.pt")
    run_r_work = project / "repro-gate-out" / "runs" / "R" / "work"
    assert (run_r_work / "checkpoints" / "last.pt").is_file()
    assert (resume["first_divergence"], resume["missing_state"]) == (None, None)
    run_r = manifest["runs"][-1]
    assert (run_r["name"], run_r["purpose"], run_r["exit_code"]) == ("R", "resume", 0)
    assert run_r["steps"] == manifest["runs"][0]["steps"]
    resumed_log = project / "repro-gate-out" / "logs" / "R-resumed.log"
    assert "resumed-by-the-resume-command" in resumed_log.read_text()
    assert "resume check: same, resumed after step 2" in result.stdout


# Three states end to end, each recorded by another part of the probe (the model's buffers, the
# DataLoader's order, the optimizer's state); the probe's records of the generators, the
# schedule and the gradient scale are tested in tests/probe/test_resume_probe.py, and naming
# every kind from records in tests/compare/test_missing_state.py.
@pytest.mark.parametrize(("forget", "kind", "generator"), [
    ("buffers", "buffers", None),
    ("data_order", "data_order", None),
    ("optimizer", "optimizer_state", None),
])
def test_a_resume_that_forgets_a_state_fails_naming_it(
    project: Path, forget: str, kind: str, generator: str | None
) -> None:
    # A gate per case: a gate resumes one run R, and each case forgets another state in it.
    result = check(project, *RESUME, *TRAINING, "--forget", forget)
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    resume = manifest["comparison"]["resume"]
    assert resume["status"] == "changed", resume
    assert resume["missing_state"] == {"kind": kind, "generator": generator}
    assert manifest["reasons"][0]["code"] == "resume_changed"
    assert sentence(resume["missing_state"]) in manifest["reasons"][0]["message"]
    assert sentence(resume["missing_state"]) in result.stdout
    assert (manifest["comparison"]["first_divergence"], manifest["verdict"]) == (None, "fail")
    if forget == "buffers":
        # Parameters and loss agree after the resume; the running statistics do not, from the
        # first resumed step on.
        divergence = resume["first_divergence"]
        assert (divergence["step"], divergence["cause"]) == (3, "buffers"), divergence


def test_no_checkpoint_after_the_resume_step_is_an_error(project: Path) -> None:
    # Its own gate: the only training here that writes no checkpoint.
    result = check(project, *RESUME, *TRAINING, "--no-checkpoint")
    assert_one_line_error(result, "no_checkpoint",
                          "run R wrote no checkpoint at or after step 2 (resume.after)")


def test_a_torchrun_ddp_training_resumes_on_both_ranks(project: Path) -> None:
    # Its own gate: the only training here under torchrun, two ranks resumed.
    result = check(project, *RESUME, "--", *TORCHRUN, "resume_ddp.py")
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    resume = manifest["comparison"]["resume"]
    assert (resume["status"], resume["resume_step"]) == ("same", 2), resume
    run_r = manifest["runs"][-1]
    assert (run_r["name"], run_r["steps"], run_r["ranks"]) == ("R", 5, 2)


def test_runs_that_do_not_agree_leave_the_resume_unchecked(project: Path) -> None:
    # Its own gate: the only training here whose runs A and B differ.
    result = check(project, "--no-cost", "--resume-after", "1", "--", sys.executable,
                   "unseeded.py")
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["comparison"]["resume"]["status"] == "not_run"
    assert manifest["comparison"]["resume"]["note"] == (
        "runs A and B did not agree, so the resume was not checked")
    assert [run["name"] for run in manifest["runs"]] == ["A", "B"]
