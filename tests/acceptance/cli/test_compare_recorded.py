"""`repro-gate compare` trusts what the manifests recorded; wrong inputs are one line, exit 2.

Two real gates train the same script with different seeds, so their checkpoints differ.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.gate_cli import check, compare, script
from helpers.paths import TRAININGS


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Output directories of `unseeded.py` gated with --seed 1 and with --seed 2."""
    outputs = []
    for seed in ("1", "2"):
        workdir = tmp_path_factory.mktemp(f"seed{seed}")
        for training in TRAININGS.glob("*.py"):
            shutil.copy(training, workdir / training.name)
        result = check(workdir, "--no-cost", "--seed", seed, *script("unseeded.py"))
        assert result.exit_code == 0, result.stdout + result.stderr
        outputs.append(workdir / "repro-gate-out")
    return outputs[0], outputs[1]


def copies(seeds: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Both output directories copied, manifests pointing at the copies' run directories."""
    copied = []
    for name, source in zip("ab", seeds, strict=True):
        target = tmp_path / name
        shutil.copytree(source, target)
        document = json.loads((target / "manifest.json").read_text())
        for run in document["runs"]:
            run["run_dir"] = str(target / "runs" / run["name"])
        (target / "manifest.json").write_text(json.dumps(document))
        copied.append(target)
    return copied[0], copied[1]


def test_tampered_run_directory_does_not_make_different_seeds_the_same(
    seeds: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = copies(seeds, tmp_path)
    # Seed 2's run A replaced by seed 1's: the run directories now say "same".
    shutil.rmtree(b / "runs" / "A")
    shutil.copytree(a / "runs" / "A", b / "runs" / "A")
    completed = compare(str(a / "manifest.json"), str(b / "manifest.json"), "--json")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (item,) = json.loads(completed.stdout)["comparison"]["artifacts"]
    assert (item["path"], item["status"]) == ("model.pt", "different")
    assert "run B's file no longer matches the manifest in" in item["note"]
    recorded = json.loads((seeds[1] / "manifest.json").read_text())["runs"][0]["artifacts"]
    assert item["sha256_b"] == recorded[0]["sha256"]
    text = compare(str(a), str(b))
    assert text.returncode == 1
    assert text.stdout.startswith("repro-gate compare: DIFFERENT")


def test_run_directories_gone(seeds: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = copies(seeds, tmp_path)
    shutil.rmtree(a / "runs")
    shutil.rmtree(b / "runs")
    completed = compare(str(a / "manifest.json"), str(b / "manifest.json"), "--json")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (item,) = json.loads(completed.stdout)["comparison"]["artifacts"]
    assert (item["path"], item["kind"], item["status"]) == ("model.pt", "bytes", "different")


def test_intact_run_directories_give_tensor_detail(
    seeds: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = copies(seeds, tmp_path)
    completed = compare(str(a), str(b), "--json")
    assert completed.returncode == 1
    result = json.loads(completed.stdout)["comparison"]
    (item,) = result["artifacts"]
    assert (item["kind"], item["status"]) == ("torch", "different")
    assert result["first_divergence"] is not None
    same = compare(str(a), str(a / "manifest.json"))
    assert same.returncode == 0, same.stdout + same.stderr


def test_empty_directory_is_bad_input(seeds: tuple[Path, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    completed = compare(str(empty), str(seeds[0] / "manifest.json"))
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"repro-gate: error: {empty}: holds no trajectory and no artifacts (not a run directory,"
        " output directory or manifest?)"]


def test_missing_path_and_manifest_without_deterministic_run(
    seeds: tuple[Path, Path], tmp_path: Path
) -> None:
    missing = compare(str(tmp_path / "nowhere"), str(seeds[0]))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"repro-gate: error: {tmp_path / 'nowhere'}: no such run directory or manifest"]
    document = json.loads((seeds[0] / "manifest.json").read_text())
    document["runs"] = [run for run in document["runs"] if run["mode"] != "deterministic"]
    (tmp_path / "m.json").write_text(json.dumps(document))
    none = compare(str(tmp_path / "m.json"), str(seeds[0]))
    assert none.returncode == 2
    assert none.stderr.strip().splitlines() == [
        "repro-gate: error: the manifest holds no deterministic run to compare"]


def test_bad_glob_is_one_line(seeds: tuple[Path, Path]) -> None:
    completed = compare(str(seeds[0]), str(seeds[1]), "-a", "../x/*.pt")
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "repro-gate: error: artifacts: glob '../x/*.pt' must stay inside the run directory"
        " ('..' is not allowed)"]
