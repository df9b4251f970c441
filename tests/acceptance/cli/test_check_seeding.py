"""Seeding is the training's job: the gate seeds nothing unless `seed` is set, records who seeded
what, and says what it supplied. Through the real CLI, on real tiny trainings."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from helpers.gate_cli import check, script

from repro_gate import validation

UNSEEDED = ("the initial parameters differ between runs A and B: torch was never seeded: add"
            " `torch.manual_seed(0)` before mnist_style.py:15, where the first parameter is"
            " created")
REPRODUCE = [
    "  to reproduce outside the gate:",
    "    export CUBLAS_WORKSPACE_CONFIG=:4096:8",
    "    torch.use_deterministic_algorithms(True, warn_only=True)",
    "    torch.backends.cudnn.deterministic = True",
    "    torch.backends.cudnn.benchmark = False",
]


def closing(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    return lines[lines.index("  to reproduce outside the gate:"):]


def seeding_of(manifest: dict) -> dict:
    assert validation.errors("manifest", manifest) == []
    return manifest["fingerprint"]["random"]["seeding"]


def test_an_unseeded_training_that_differs_run_to_run_fails_naming_the_line_to_add(
    project: Path,
) -> None:
    # Its own gate: the unseeded training, not seeded by the gate either.
    # Without the gate, twice: the checkpoints differ. The gate must not say otherwise.
    digests = set()
    for _ in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
        subprocess.run([sys.executable, "mnist_unseeded.py"], cwd=project, env=env, check=True,
                       timeout=120)
        digests.add(hashlib.sha256((project / "model.pt").read_bytes()).hexdigest())
    assert len(digests) == 2
    (project / "model.pt").unlink()

    result = check(project, "--no-cost", *script("mnist_unseeded.py"))
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "fail"
    assert manifest["reasons"][0] == {"code": "trajectory_diverged", "message": UNSEEDED}
    assert result.stdout.splitlines()[1] == f"  {UNSEEDED}"
    divergence = manifest["comparison"]["first_divergence"]
    assert divergence["cause"] == "initialization"
    assert divergence["unseeded"] == {"generators": ["torch"], "seeded_late": False,
                                      "file": "mnist_style.py", "line": 15}
    seeding = seeding_of(manifest)
    assert seeding["gate_seed"] is None and manifest["fingerprint"]["random"]["seed"] is None
    assert seeding["training"] == []
    assert seeding["first_parameter"] == {"file": "mnist_style.py", "line": 15,
                                          "module": "Linear", "torch_seeded_before": False}
    assert seeding["parameters_before_seeding"] is True
    assert "torch" in seeding["unseeded"]
    assert "seeded by the gate" not in result.stdout
    assert closing(result.stdout) == REPRODUCE


def test_with_seed_the_gate_seeds_and_every_report_says_so(project: Path) -> None:
    # Its own gate: the unseeded training, seeded by the gate.
    result = check(project, "--no-cost", "--seed", "3", *script("mnist_unseeded.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "pass"
    assert "  seeded by the gate (seed 3)" in result.stdout.splitlines()
    assert closing(result.stdout) == [
        *REPRODUCE, "    random.seed(3)", "    numpy.random.seed(3)", "    torch.manual_seed(3)"]
    seeding = seeding_of(manifest)
    assert (seeding["gate_seed"], manifest["fingerprint"]["random"]["seed"]) == (3, 3)
    assert seeding["training"] == [] and seeding["unseeded"] == []
    assert seeding["parameters_before_seeding"] is False
    assert seeding["first_parameter"]["torch_seeded_before"] is True
    items = {item["id"]: item for item in manifest["checklist"]["items"]}
    assert items["seeds"]["detail"].startswith("seeded by the gate (seed 3)")
    report = subprocess.run(
        [sys.executable, "-m", "repro_gate", "report", "--manifest",
         str(project / "repro-gate-out" / "manifest.json"), "--markdown"],
        cwd=project, capture_output=True, text=True, timeout=120)
    if report.returncode == 0:  # the local preview, where this gate has it
        assert "seeded by the gate (seed 3)" in report.stdout


def test_a_training_that_seeds_itself_passes_and_its_seeding_is_recorded(project: Path) -> None:
    # Its own gate: a training that seeds itself.
    result = check(project, "--no-cost", *script("mnist_seeded.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    seeding = seeding_of(manifest)
    calls = {call["call"]: call for call in seeding["training"]}
    assert calls["torch.manual_seed"] == {
        "generator": "torch", "call": "torch.manual_seed", "seed": 0,
        "file": "mnist_seeded.py", "line": 10, "before_parameters": True, "count": 1}
    assert (calls["random.seed"]["file"], calls["random.seed"]["line"]) == ("mnist_seeded.py", 11)
    assert calls["numpy.random.default_rng"]["generator"] == "numpy.default_rng"
    assert calls["numpy.random.default_rng"]["line"] == 12
    assert seeding["gate_seed"] is None
    assert seeding["first_parameter"]["torch_seeded_before"] is True
    assert seeding["parameters_before_seeding"] is False
    assert "seeded by the gate" not in result.stdout
    assert closing(result.stdout) == REPRODUCE
    items = {item["id"]: item for item in manifest["checklist"]["items"]}
    assert items["seeds"]["status"] == "pass"
    assert "torch at mnist_seeded.py:10" in items["seeds"]["detail"]


def test_settings_the_training_applies_itself_are_recorded_as_its_own(project: Path) -> None:
    # Its own gate: a training that applies determinism settings itself.
    result = check(project, "--no-cost", "--env", "CUBLAS_WORKSPACE_CONFIG=:4096:8",
                   "--env", "PYTHONHASHSEED=0", *script("mnist_sets_determinism.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    settings = {s["name"]: s for s in seeding_of(result.manifest)["settings"]}
    assert settings["use_deterministic_algorithms"] == {
        "name": "use_deterministic_algorithms", "applied_by_gate": True, "set_by_training": True,
        "reproduce": "torch.use_deterministic_algorithms(True, warn_only=True)"}
    assert settings["CUBLAS_WORKSPACE_CONFIG"]["set_by_training"] is True  # the user's own
    assert settings["cudnn_deterministic"]["set_by_training"] is False
    assert "PYTHONHASHSEED" not in settings  # observed per run, never a line to reproduce
    # A hash seed in `env` is the user's choice, for every run.
    assert [run["hash_seed"] for run in result.manifest["runs"]] == ["0", "0"]
    assert closing(result.stdout) == [
        "  to reproduce outside the gate:",
        "    torch.backends.cudnn.deterministic = True",
        "    torch.backends.cudnn.benchmark = False",
    ]


def test_a_training_that_depends_on_the_hash_seed_fails_the_plain_check(project: Path) -> None:
    # Its own gate: a vocabulary numbered by iterating a set of strings; the gate gives runs A
    # and B two different hash seeds instead of hiding it behind one.
    result = check(project, "--no-cost", *script("hash_seed_vocab.py"))
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert [run["hash_seed"] for run in manifest["runs"]] == ["0", "1"]
    divergence = manifest["comparison"]["first_divergence"]
    assert (divergence["step"], divergence["cause"]) == (1, "input")
    assert divergence["hash_seeds"] == {"A": "0", "B": "1"}
    reason = manifest["reasons"][0]
    assert reason["code"] == "trajectory_diverged"
    assert reason["message"].endswith(
        "; runs A and B had different hash seeds (PYTHONHASHSEED 0 and 1): if the training"
        " numbers or orders anything by iterating a set of strings (a vocabulary, a list of"
        " files), iterate sorted, not a set")
    assert reason["message"] in result.stdout
    # Outside the identity and the facts the runs must agree on.
    fields = {m["field"] for m in manifest["fingerprint"]["in_process"]["mismatches"]}
    assert "random.pythonhashseed" not in fields
