"""`repro-gate check` end to end, on real tiny trainings, through the command line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.gate_cli import Result, check, script
from helpers.paths import TRAININGS

from repro_gate import validation

PARAMETERS = ["encoder.weight", "encoder.bias", "head.weight", "head.bias"]


def test_deterministic_script_passes_bitwise(project: Path) -> None:
    # Its own gate: the default gate's runs (A and B; the cost run is not started for a
    # training this short), with no noise floor.
    result = check(project, *script("deterministic.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["verdict"] == "pass"
    assert manifest["reasons"][0]["code"] == "bitwise_equal"
    assert [r["name"] for r in manifest["runs"]] == ["A", "B"]
    assert [r["mode"] for r in manifest["runs"]] == ["deterministic", "deterministic"]
    assert all(r["steps"] == 6 for r in manifest["runs"])
    (artifact,) = manifest["comparison"]["artifacts"]
    assert artifact["path"] == "model.pt"
    assert (artifact["kind"], artifact["status"]) == ("torch", "equal")
    assert manifest["comparison"]["trajectory"] == {
        "steps_compared": 6, "status": "equal", "steps": {"A": 6, "B": 6}}
    sha_a, sha_b = (r["artifacts"][0]["sha256"] for r in manifest["runs"][:2])
    assert sha_a == sha_b
    # 6 steps are too few for the cost run's blocks: an honest "inconclusive", not an error,
    # and no run that could not have given a figure.
    assert (manifest["cost"]["basis"], manifest["cost"]["status"]) == ("blocks", "inconclusive")
    assert manifest["cost"]["reason"].endswith(", so the cost run was not started")
    assert "PASS" in result.stdout and "cost of determinism" in result.stdout


def test_unseeded_script_fails_because_the_gate_no_longer_seeds_it(project: Path) -> None:
    # Its own gate: the same training without the gate's seed.
    result = check(project, *script("unseeded.py"))
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "fail"
    assert manifest["reasons"][0]["message"] == (
        "the initial parameters differ between runs A and B: torch was never seeded: add"
        " `torch.manual_seed(0)` before tiny.py:11, where the first parameter is created")
    # model.pt was written into the working directory and moved into each run's folder.
    assert not (project / "model.pt").exists()


@pytest.fixture(scope="module")
def seeded_by_the_gate(tmp_path_factory: pytest.TempPathFactory) -> Result:
    """unseeded.py seeded by the gate, with the noise floor's two default-mode runs: one gate
    for what the seed fixes (runs A and B) and what it does not (the other runs)."""
    project = tmp_path_factory.mktemp("seeded-by-the-gate")
    for training in TRAININGS.glob("*.py"):
        shutil.copy(training, project / training.name)
    return check(project, "--noise-floor", "--seed", "0", *script("unseeded.py"))


def test_unseeded_script_passes_when_the_gate_is_asked_to_seed_it(
        seeded_by_the_gate: Result) -> None:
    result = seeded_by_the_gate
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "pass"
    assert "  seeded by the gate (seed 0)" in result.stdout.splitlines()
    runs = {r["name"]: r for r in manifest["runs"]}
    assert runs["A"]["artifacts"][0]["path"] == "model.pt"
    assert runs["A"]["artifacts"][0]["sha256"] == runs["B"]["artifacts"][0]["sha256"]
    # The default-mode runs are never seeded, so their checkpoints come from another init.
    assert runs["default"]["artifacts"][0]["sha256"] != runs["A"]["artifacts"][0]["sha256"]


@pytest.mark.parametrize(
    ("name", "step", "parameters", "cause"),
    [
        ("urandom_noise.py", 3, ["head.bias"], "backward"),  # the gradient is touched
        ("thread_race.py", 2, ["encoder.weight"], "backward"),
        # The batches follow the listing. When two runs' first batches hold the same shards in
        # another order, each gradient is the same sum in another order: which parameters come
        # out different depends on rounding, so any of them may.
        ("listdir_order.py", 1, None, "input"),
    ],
)
def test_nondeterminism_seeding_cannot_fix_fails_at_the_right_step(
    project: Path, name: str, step: int, parameters: list[str] | None, cause: str
) -> None:
    # A gate per training: each breaks reproducibility in its own way.
    result = check(project, *script(name))
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "fail"
    divergence = manifest["comparison"]["first_divergence"]
    assert divergence["step"] == step
    if parameters is None:
        assert divergence["parameters"] and set(divergence["parameters"]) <= set(PARAMETERS)
    else:
        assert divergence["parameters"] == parameters
    assert divergence["cause"] == cause
    assert divergence["runs"] == ["A", "B"]
    assert manifest["reasons"][0]["code"] == "trajectory_diverged"
    # fail-fast: run B stopped at the divergent step, and no cost run was spent. A backward
    # cause gets the localisation run L, which finds every module reproducible here.
    run_b = manifest["runs"][1]
    assert (run_b["stopped"], run_b["steps"]) == ("divergence", step)
    localised = ["L"] if cause == "backward" else []
    assert [r["name"] for r in manifest["runs"]] == ["A", "B", *localised]
    assert "module" not in divergence
    assert f"first divergence: step {step}" in result.stdout


def test_without_fail_fast_the_checkpoints_are_compared_too(project: Path) -> None:
    # Its own gate: run B goes on past the divergence, and the checkpoints differ bitwise.
    result = check(project, "--no-fail-fast", "--no-cost", *script("urandom_noise.py"))
    assert result.exit_code == 1
    manifest = result.manifest
    assert manifest["comparison"]["first_divergence"]["step"] == 3
    (artifact,) = manifest["comparison"]["artifacts"]
    assert artifact["status"] == "different"
    differing = [t["name"] for t in artifact["tensors"] if t["status"] != "equal"]
    assert "head.bias" in differing
    assert manifest["cost"] is None


def test_put_op_is_reported_at_its_file_and_line(project: Path) -> None:
    # Its own gate: the op under the default determinism (warn), which passes.
    result = check(project, *script("put_op.py"))
    manifest = result.manifest
    assert manifest["verdict"] == "pass"  # put_ without duplicate indices gives equal results
    (op,) = manifest["nondeterministic_ops"]
    assert op["op"].startswith("put_")
    assert Path(op["file"]).name == "put_op.py"
    assert op["line"] == 10
    assert op["count"] == 6  # once per step
    assert op["steps"] == [1, 2, 3, 4, 5, 6]  # the step in progress at each occurrence
    assert op["kind"] == "nondeterministic_op"
    assert "put_op.py:10" in result.stdout


def test_strict_determinism_fails_on_the_op(project: Path) -> None:
    # Its own gate: under strict determinism the op raises and the gate fails.
    result = check(project, "--determinism", "strict", "--resume-after", "2",
                   *script("put_op.py"))
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "fail"
    assert manifest["reasons"][0]["code"] == "nondeterministic_op_strict"
    resume = manifest["comparison"]["resume"]
    assert resume["status"] == "not_run"
    assert "determinism: strict" in resume["note"]
    (op,) = manifest["nondeterministic_ops"]
    assert (Path(op["file"]).name, op["line"], op["kind"]) == ("put_op.py", 10, "strict_error")


def test_tolerance_turns_a_small_difference_into_a_pass(project: Path) -> None:
    # Its own gate: the tolerance decides its artifacts' comparison.
    result = check(project, "--no-fail-fast", "--no-cost", "--tolerance", "atol=1e-2,rtol=0",
                   "--artifacts", "model.pt", *script("urandom_noise.py"))
    manifest = result.manifest
    # The trajectory still shows the divergence: tolerance applies to artifacts, not to steps.
    assert manifest["comparison"]["basis"] == "tolerance"
    (artifact,) = manifest["comparison"]["artifacts"]
    assert artifact["status"] == "within_tolerance"
    assert artifact["tolerance"] == {"atol": 0.01, "rtol": 0.0}


def test_noise_floor_compares_two_default_mode_runs(
        project: Path, seeded_by_the_gate: Result) -> None:
    # Seeded by the gate only, the default-mode runs start from different weights: they
    # differ from step 1.
    noisy = seeded_by_the_gate.manifest
    assert [r["name"] for r in noisy["runs"]] == ["A", "B", "default", "default2"]
    assert noisy["noise_floor"] == {"first_divergent_step": 1, "steps_compared": 1,
                                    "runs": ["default", "default2"]}
    # Its own gate: the gate of test_deterministic_script_passes_bitwise runs no noise floor.
    quiet = check(project, "--noise-floor", *script("deterministic.py")).manifest
    assert quiet["noise_floor"] == {"first_divergent_step": None, "steps_compared": 6,
                                    "runs": ["default", "default2"]}
