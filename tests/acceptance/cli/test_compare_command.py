"""`repro-gate compare A B` on what two gates left behind: run directories, output directories,
manifests alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.gate_cli import check, compare, script
from helpers.paths import TRAININGS


@pytest.fixture(scope="module")
def two_gates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Output directories of a seeded training and of an unseeded one writing into its cwd."""
    outputs = []
    for name in ("deterministic.py", "unseeded.py"):
        workdir = tmp_path_factory.mktemp(name.removesuffix(".py"))
        for training in TRAININGS.glob("*.py"):
            shutil.copy(training, workdir / training.name)
        result = check(workdir, "--no-cost", "--seed", "0", *script(name))  # seeds unseeded.py
        assert result.exit_code == 0, result.stdout + result.stderr
        outputs.append(workdir / "repro-gate-out")
    return outputs[0], outputs[1]


def test_runs_of_one_gate_are_the_same(two_gates: tuple[Path, Path]) -> None:
    seeded, _ = two_gates
    completed = compare(str(seeded / "runs/A"), str(seeded / "runs/B"), "--json")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    result = json.loads(completed.stdout)
    assert result["verdict"] == "pass"
    assert result["comparison"]["trajectory"]["status"] == "equal"
    assert [a["status"] for a in result["comparison"]["artifacts"]] == ["equal"]


def test_different_trainings_differ_from_the_first_step(two_gates: tuple[Path, Path]) -> None:
    seeded, unseeded = two_gates
    completed = compare(str(seeded), str(unseeded), "--json")
    assert completed.returncode == 1
    comparison = json.loads(completed.stdout)["comparison"]
    assert comparison["first_divergence"]["step"] == 1
    # model.pt was moved out of the unseeded script's working directory and still pairs up.
    (artifact,) = comparison["artifacts"]
    assert (artifact["path"], artifact["kind"], artifact["status"]) == (
        "model.pt", "torch", "different")


def test_manifests_alone_compare_artifacts_by_digest(
    two_gates: tuple[Path, Path], tmp_path: Path
) -> None:
    seeded, unseeded = two_gates
    # Manifests copied elsewhere, as after downloading them from two runners' artifacts.
    for name, source in (("a", seeded), ("b", unseeded)):
        document = json.loads((source / "manifest.json").read_text())
        for run in document["runs"]:
            run["run_dir"] = str(tmp_path / "gone" / run["name"])
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    completed = compare(str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert completed.returncode == 1
    assert "model.pt differs between runs A and B" in completed.stdout
    assert "compared by sha256 from a manifest" in completed.stdout
    same = compare(str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert same.returncode == 0


def test_missing_side_is_a_clean_error(tmp_path: Path) -> None:
    completed = compare(str(tmp_path / "nowhere"), str(tmp_path))
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f"repro-gate: error: {tmp_path / 'nowhere'}: no such run directory or manifest")


SAVES_IN_ITS_DIRECTORY = """\
import torch
from tiny import train

torch.manual_seed(1234)
train(checkpoint="model.pt")
"""


@pytest.fixture(scope="module")
def saved_in_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of a seeded training that saves model.pt next to itself."""
    workdir = tmp_path_factory.mktemp("saves-in-cwd")
    shutil.copy(TRAININGS / "tiny.py", workdir / "tiny.py")
    (workdir / "train.py").write_text(SAVES_IN_ITS_DIRECTORY)
    result = check(workdir, "--no-cost", *script("train.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    return workdir / "repro-gate-out"


@pytest.mark.parametrize("glob", ["*.pt", "**/*.pt", "model.pt"])
def test_a_glob_finds_the_artifacts_wherever_the_gate_stored_them(
        saved_in_workdir: Path, glob: str) -> None:
    runs = saved_in_workdir / "runs"
    for a, b in ((runs / "A", runs / "B"), (saved_in_workdir, saved_in_workdir)):
        completed = compare(str(a), str(b), "-a", glob, "--json")
        assert completed.returncode == 0, completed.stdout + completed.stderr
        artifacts = json.loads(completed.stdout)["comparison"]["artifacts"]
        assert [(item["path"], item["status"]) for item in artifacts] == [("model.pt", "equal")]


def test_a_glob_that_matches_nothing_on_either_side_is_an_error(saved_in_workdir: Path) -> None:
    runs = saved_in_workdir / "runs"
    completed = compare(str(runs / "A"), str(runs / "B"), "-a", "*.pt", "-a", "*.safetensors")
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.strip() == (
        "repro-gate: error: -a '*.safetensors' matches no artifact of run A or run B"
        " (their artifacts: model.pt)")
    assert completed.stdout == ""


def test_a_glob_that_matches_on_one_side_only_is_a_named_difference(
        saved_in_workdir: Path, tmp_path: Path) -> None:
    runs = saved_in_workdir / "runs"
    other = shutil.copytree(runs / "B", tmp_path / "B")
    shutil.copy(next(other.rglob("model.pt")), other / "extra.pt")
    completed = compare(str(runs / "A"), str(other), "-a", "*.pt")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "extra.pt is present in run B only" in completed.stdout
