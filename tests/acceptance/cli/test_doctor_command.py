"""`repro-gate doctor` on a clean and a sloppy sample project, through the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from helpers.gate_cli import CLI
from helpers.git_repo import GIT
from helpers.paths import FIXTURES

from repro_gate import validation

PROJECTS = FIXTURES / "projects"


def project(tmp_path: Path, name: str, *, commit: bool) -> Path:
    repo = tmp_path / name
    shutil.copytree(PROJECTS / name, repo)
    if commit:
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "sample"]):
            subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def doctor(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), "doctor", *args], cwd=repo, capture_output=True, text=True,
                          timeout=120)


def statuses(document: dict) -> dict[str, str]:
    return {item["id"]: item["status"] for item in document["checklist"]["items"]}


def test_clean_project_passes(tmp_path: Path) -> None:
    repo = project(tmp_path, "clean", commit=True)
    started = time.monotonic()
    done = doctor(repo, "--json")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert validation.errors("checklist", document["checklist"]) == []
    assert statuses(document) == {
        "image_pinned": "pass",
        "lockfile": "pass",
        "packages_match_lock": "deferred",  # the packages live in the image
        "clean_tree": "pass",
        "data": "pass",
        "seeds": "pass",
        "deterministic_algorithms": "deferred",
        "cudnn_benchmark": "deferred",
        "cublas_workspace": "deferred",
        "dataloader_workers": "deferred",
        "tf32": "deferred",
        "gpus_same_model": "pass",
    }
    data = next(i for i in document["checklist"]["items"] if i["id"] == "data")
    assert "hashed during `repro-gate check`" in data["detail"]
    assert elapsed < 10  # the static part stays fast (2 s target, shared CI machines vary)


def test_clean_project_with_data_hashing(tmp_path: Path) -> None:
    repo = project(tmp_path, "clean", commit=True)
    done = doctor(repo, "--json", "--hash-data")
    assert done.returncode == 0, done.stderr
    data = next(i for i in json.loads(done.stdout)["checklist"]["items"] if i["id"] == "data")
    assert data["detail"] == "3 files, 69 bytes, sha256 recorded"


def test_sloppy_project_fails_with_fixes(tmp_path: Path) -> None:
    repo = project(tmp_path, "sloppy", commit=False)
    done = doctor(repo, "--json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert validation.errors("checklist", document["checklist"]) == []
    found = statuses(document)
    assert {k: found[k] for k in ("image_pinned", "lockfile", "data", "cublas_workspace")} == {
        "image_pinned": "fail", "lockfile": "fail", "data": "fail", "cublas_workspace": "fail"}
    assert found["clean_tree"] == "warn"
    assert document["checklist"]["counts"]["fail"] == 4
    items = {item["id"]: item for item in document["checklist"]["items"]}
    assert items["lockfile"]["detail"] == (
        "requirements.txt does not pin every requirement (numpy, torch, tqdm)")
    assert items["clean_tree"]["detail"].startswith("code is not identified")


def test_sloppy_project_lines(tmp_path: Path) -> None:
    repo = project(tmp_path, "sloppy", commit=False)
    done = doctor(repo)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "repro-gate doctor: 1 pass, 1 warn, 4 fail, 6 checked during a run"
    assert ("FAIL     env      image pinned by digest: pytorch/pytorch:latest is a tag: it can"
            " point at another image tomorrow") in lines
    fix_index = lines.index("FAIL     random   cuBLAS workspace configured: `env` sets"
                            " CUBLAS_WORKSPACE_CONFIG=:0:0") + 1
    assert lines[fix_index].strip() == (
        "fix: set CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) in `env:`")
    assert ("DEFERRED random   DataLoader workers seeded: checked during `repro-gate check`"
            in lines)
    # No `seed` configured: the gate seeds nothing, so whether the training does is seen in a run.
    assert ("DEFERRED random   seeds set: checked during `repro-gate check`: the gate seeds"
            " nothing, the training must seed itself") in lines


def test_packages_checked_against_the_lock_for_local_runs(tmp_path: Path) -> None:
    from importlib import metadata

    repo = tmp_path / "local"
    repo.mkdir()
    numpy_version = metadata.version("numpy")
    (repo / "requirements.txt").write_text(
        "numpy==0.0.1 \\\n    --hash=sha256:" + "a" * 64 + "\n", encoding="utf-8")
    (repo / ".repro-gate.yml").write_text("seed: 1\n", encoding="utf-8")
    done = doctor(repo, "--json")
    assert done.returncode == 1
    items = {item["id"]: item for item in json.loads(done.stdout)["checklist"]["items"]}
    assert items["packages_match_lock"]["status"] == "fail"
    assert items["packages_match_lock"]["detail"] == (
        f"1 installed differ from the lock: numpy {numpy_version} (locked 0.0.1 in"
        " requirements.txt)")
    assert items["image_pinned"]["status"] == "warn"


def test_bad_config_exit_2(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text("seed: [1\n", encoding="utf-8")
    done = doctor(tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert "not valid YAML" in done.stderr
    missing = doctor(tmp_path, "--config", str(tmp_path / "nope.yml"))
    assert missing.returncode == 2
    assert "not found" in missing.stderr
