"""Attribution when both the software and the code changed since the golden file's commit: the
gate rebuilds the golden file's lock (real environments from a local wheel folder, layered over
the interpreter that has torch) and runs the pull request's code there once, as run G.

The first gate (numlib 1.0) is blessed once for the module; each test changes a copy of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers.git_repo import git
from helpers.golden_training import NEUTRAL, REORDERED_SUM, SUM, training
from helpers.local_indexes import make_wheel

import repro_gate

SCALES = {"1.0": "1.0", "2.0": "1.5"}


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def interpreter(root: Path, wheel: Path) -> Path:
    """A bare virtual environment with `wheel` installed (unpacked) in it; the interpreter that
    has torch is reached through PYTHONPATH (`gate_env`)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True,
                   timeout=120)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root / "lib" / version / "site-packages")
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def blessed_setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Interpreters with numlib 1.0 and 2.0, and a repository whose training (numlib 1.0, the
    plain sum) is gated, blessed and committed, once for the module."""
    tmp = tmp_path_factory.mktemp("rebuild")
    wheels = tmp / "wheels"
    found = {v: make_wheel(wheels, "numlib", v, f"SCALE = {s}\n") for v, s in SCALES.items()}
    pythons = {v: interpreter(tmp / f"python-numlib-{v}", w) for v, w in found.items()}
    repo = tmp / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("repro-gate-out/\n")
    setup = {"repo": repo, "wheels": wheels, "pythons": pythons, "tmp": tmp}
    write_config(setup)
    write_project(setup, "1.0", SUM)
    commit(repo, "Train with numlib 1.0")
    first = run(setup, "1.0", "check")
    assert first.returncode == 0, first.stdout + first.stderr
    blessed = run(setup, "1.0", "bless")
    assert blessed.returncode == 0, blessed.stdout + blessed.stderr
    commit(repo, "Bless the golden trajectory")
    return setup


@pytest.fixture
def setup(blessed_setup: dict, tmp_path: Path) -> dict:
    """A copy of the blessed repository for one test, with environments cached in its own
    folder (the interpreters and wheels are the module's)."""
    repo = Path(shutil.copytree(blessed_setup["repo"], tmp_path / "project", symlinks=True))
    return {**blessed_setup, "repo": repo, "tmp": tmp_path}


def write_config(setup: dict) -> None:
    (setup["repo"] / ".repro-gate.yml").write_text(
        "upgrade:\n  inherit_site_packages: true\n"
        f"  cache_dir: {json.dumps(str(setup['tmp'] / 'env-cache'))}\n")


def gate_env(python: Path, tmp: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("GITHUB_", "INPUT_")) and k != "VIRTUAL_ENV"}
    torch_site = sysconfig.get_paths()["purelib"]
    # The gate itself, however it is installed (an editable install's .pth is not read from a
    # PYTHONPATH folder).
    gate_source = str(Path(repro_gate.__file__).resolve().parents[1])
    paths = [gate_source, *filter(None, [os.environ.get("PYTHONPATH")]), torch_site]
    return {**clean, "PYTHONPATH": os.pathsep.join(paths),
            "PATH": os.pathsep.join([str(python.parent), clean.get("PATH", "")]),
            "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
            "UV_CACHE_DIR": str(tmp / "uv-cache")}


def run(setup: dict, version: str, command: str) -> subprocess.CompletedProcess[str]:
    python = setup["pythons"][version]
    args = ["--quiet", "--no-cost", "--", "python", "train.py"] if command == "check" else []
    return subprocess.run([str(python), "-m", "repro_gate", command, *args], cwd=setup["repo"],
                          env=gate_env(python, setup["tmp"]), capture_output=True, text=True,
                          timeout=300, check=False)


def write_project(setup: dict, version: str, total: str) -> None:
    repo = setup["repo"]
    (repo / "train.py").write_text(training(total, numlib=True))
    (repo / "requirements.txt").write_text(
        f"--no-index\n--find-links {setup['wheels']}\nnumlib=={version}\n")


def changed_both(setup: dict, total: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    """From the blessed repository (numlib 1.0), bump numlib to 2.0 and change the code to
    `total`; the gate of that commit."""
    write_config(setup)  # this test's own environment cache
    write_project(setup, "2.0", total)
    commit(setup["repo"], "Upgrade numlib and touch the training")
    done = run(setup, "2.0", "check")
    manifest = json.loads((setup["repo"] / "repro-gate-out" / "manifest.json").read_text())
    return done, manifest


def assert_run_g(manifest: dict) -> None:
    runs = {entry["name"]: entry for entry in manifest["runs"]}
    assert runs["G"]["purpose"] == "golden_attribution"
    assert runs["G"]["steps"] == 5


def test_a_neutral_code_change_with_a_lock_bump_is_put_down_to_the_environment(
        setup: dict) -> None:
    done, manifest = changed_both(setup, NEUTRAL)
    assert done.returncode == 1, done.stdout + done.stderr
    golden = manifest["comparison"]["golden"]
    assert golden["status"] == "changed"
    assert "lock" in [entry["field"] for entry in golden["software_diff"]]
    assert golden["attribution"]["kind"] == "environment", golden["attribution"]
    assert golden["attribution"]["reason"] == (
        "the pull request's code in the golden file's software reproduces the golden"
        " trajectory: the software change did it")
    assert_run_g(manifest)


def test_a_reordered_sum_with_a_lock_bump_is_put_down_to_the_code(setup: dict) -> None:
    done, manifest = changed_both(setup, REORDERED_SUM)
    assert done.returncode == 1, done.stdout + done.stderr
    golden = manifest["comparison"]["golden"]
    assert golden["status"] == "changed"
    assert golden["attribution"]["kind"] == "code", golden["attribution"]
    assert golden["attribution"]["reason"].startswith(
        "the pull request's code in the golden file's software does not reproduce")
    assert_run_g(manifest)
