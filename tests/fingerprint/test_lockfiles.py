"""Lockfile parsers on realistic sample files, and lockfile discovery."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from helpers.paths import FIXTURES

from repro_gate.fingerprint.lockfiles import describe_lockfile, find_lockfiles
from repro_gate.fingerprint.packages import lock_mismatches

LOCKFILES = FIXTURES / "lockfiles"


def describe(name: str) -> dict:
    return describe_lockfile(LOCKFILES / name, name)


def test_requirements_with_hashes_is_a_hash_pinned_lock() -> None:
    entry = describe("requirements.txt")
    assert entry["format"] == "requirements"
    assert entry["is_lock"] is True
    assert entry["hash_pinned"] is True
    assert entry["packages"] == 6
    assert entry["pins"] == {
        "certifi": ["2024.7.4"],
        "charset-normalizer": ["3.3.2"],
        "idna": ["3.7"],
        "numpy": ["1.26.4"],
        "requests": ["2.32.3"],
        "torch": ["2.3.1"],
    }
    raw = (LOCKFILES / "requirements.txt").read_bytes()
    assert entry["sha256"] == hashlib.sha256(raw).hexdigest()
    assert entry["bytes"] == len(raw)


def test_loose_requirements_are_not_a_lock() -> None:
    entry = describe("requirements-loose.txt")
    assert entry["is_lock"] is False
    assert entry["hash_pinned"] is False
    assert entry["unpinned"] == ["numpy", "torch"]
    assert entry["pins"] == {"requests": ["2.32.3"]}
    assert "not pinned" in entry["note"]


def test_poetry_lock() -> None:
    entry = describe("poetry.lock")
    assert entry["format"] == "poetry.lock"
    assert entry["pins"] == {"filelock": ["3.15.4"], "numpy": ["1.26.4"], "torch": ["2.3.1"]}
    assert entry["hash_pinned"] is True
    assert entry["lock_version"] == "2.0"
    assert entry["content_hash"].startswith("5d4f8b2b")


def test_uv_lock_skips_the_editable_project_for_hashes() -> None:
    entry = describe("uv.lock")
    assert entry["format"] == "uv.lock"
    assert entry["pins"] == {"numpy": ["2.0.1"], "sample-trainer": ["0.1.0"], "torch": ["2.4.0"]}
    assert entry["hash_pinned"] is True
    assert entry["lock_version"] == 1


def test_pipfile_lock_reads_default_and_develop() -> None:
    entry = describe("Pipfile.lock")
    assert entry["pins"] == {"numpy": ["1.26.4"], "pytest": ["8.3.2"], "torch": ["2.3.1"]}
    assert entry["hash_pinned"] is True
    assert entry["lock_version"] == 6
    assert entry["content_hash"].startswith("9f2c3b0f")


def test_pylock_toml_directory_package_has_no_hash() -> None:
    entry = describe("pylock.toml")
    assert entry["format"] == "pylock.toml"
    assert entry["pins"] == {"numpy": ["2.0.1"], "torch": ["2.4.0"]}
    assert entry["packages"] == 3
    assert entry["hash_pinned"] is False  # the local directory entry carries no hash
    assert entry["lock_version"] == "1.0"


def test_conda_lock_merges_platforms() -> None:
    entry = describe("conda-lock.yml")
    assert entry["pins"] == {"numpy": ["1.26.4"], "python": ["3.11.9"], "rich": ["13.7.1"]}
    assert entry["platforms"] == ["linux-64", "osx-arm64"]
    assert entry["packages"] == 4
    assert entry["hash_pinned"] is True


def test_pixi_lock_takes_conda_names_from_the_url() -> None:
    entry = describe("pixi.lock")
    assert entry["pins"] == {"numpy": ["1.26.4"], "python": ["3.11.9"], "rich": ["13.7.1"]}
    assert entry["environments"] == ["default"]
    assert entry["lock_version"] == 6
    assert entry["hash_pinned"] is True


def test_environment_yml_is_reported_as_not_a_lock() -> None:
    entry = describe("environment.yml")
    assert entry["is_lock"] is False
    assert entry["pins"] == {}
    assert entry["note"].startswith("not a lock")


def test_unparseable_lockfile_says_why(tmp_path: Path) -> None:
    broken = tmp_path / "poetry.lock"
    broken.write_text("[[package]\nname = ", encoding="utf-8")
    entry = describe_lockfile(broken, "poetry.lock")
    assert entry["error"].startswith("cannot parse:")
    assert entry["pins"] == {}
    assert len(entry["sha256"]) == 64


def test_find_lockfiles_walks_up_to_the_repository_root(tmp_path: Path) -> None:
    shutil.copy(LOCKFILES / "uv.lock", tmp_path / "uv.lock")
    sub = tmp_path / "training"
    (sub / "requirements").mkdir(parents=True)
    shutil.copy(LOCKFILES / "requirements.txt", sub / "requirements" / "gpu.txt")
    shutil.copy(LOCKFILES / "environment.yml", sub / "environment.yml")
    (sub / "notes.txt").write_text("not a lockfile", encoding="utf-8")
    found = find_lockfiles(sub, stop_at=tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "training/requirements/gpu.txt",
        "training/environment.yml",
        "uv.lock",
    ]
    assert find_lockfiles(sub) == found[:2]


def test_installed_versions_that_differ_from_the_lock() -> None:
    lockfiles = [describe("uv.lock"), describe("environment.yml")]
    installed = {"numpy": "1.26.4", "torch": "2.4.0+cu121", "rich": "13.7.1"}
    assert lock_mismatches(installed, lockfiles) == [
        {"name": "numpy", "installed": "1.26.4", "locked": ["2.0.1"], "lockfile": "uv.lock"}
    ]
