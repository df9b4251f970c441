"""Host-side facts collected before the runs: code, data, lockfiles up to the repository root."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

from helpers.git_repo import git

from repro_gate.fingerprint.host import collect_host, collect_lockfiles, list_data

PINNED = "numpy==2.0.1\n"


def project(tmp_path: Path) -> Path:
    """A repository whose training lives in `trainer/`, with a lock at the root and one there."""
    repo = tmp_path / "repo"
    (repo / "trainer" / "data").mkdir(parents=True)
    (repo / "requirements.txt").write_text(PINNED, encoding="utf-8")
    (repo / "trainer" / "uv.lock").write_text("version = 1\n", encoding="utf-8")
    (repo / "trainer" / "data" / "x.bin").write_bytes(b"12345")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_lockfiles_are_found_from_the_workdir_up_to_the_repository_root(tmp_path: Path) -> None:
    repo = project(tmp_path)
    (tmp_path / "requirements.txt").write_text("outside==1\n", encoding="utf-8")

    found = collect_lockfiles(repo / "trainer")

    assert [entry["path"] for entry in found] == ["uv.lock", "../requirements.txt"]
    assert found[1]["sha256"] == hashlib.sha256(PINNED.encode()).hexdigest()
    assert found[1]["pins"] == {"numpy": ["2.0.1"]}


def test_without_hashing_the_data_paths_are_only_checked_to_exist(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "labels.csv").write_text("x\n", encoding="utf-8")

    assert list_data(["data", "labels.csv", "gone"], tmp_path) == {
        "paths": [
            {"path": "data/", "sha256": None, "bytes": 0, "files": 0, "kind": "directory",
             "note": "not hashed"},
            {"path": "labels.csv", "sha256": None, "bytes": 0, "files": 0, "kind": "file",
             "note": "not hashed"},
            {"path": "gone", "sha256": None, "bytes": 0, "files": 0, "error": "does not exist"},
        ],
        "bytes": 0, "files": 0, "hashed": False,
    }


def test_the_host_facts_gather_code_data_and_lockfiles(tmp_path: Path) -> None:
    repo = project(tmp_path)
    workdir = repo / "trainer"

    host = collect_host([Path("data")], workdir, gate_files=[workdir / "repro-gate-out"])
    quick = collect_host([Path("data")], workdir, hash_data_files=False)

    assert datetime.fromisoformat(host["collected_at"]).tzinfo is not None
    assert host["code"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert host["code"]["dirty"] is False
    assert (host["data"]["hashed"], host["data"]["files"], host["data"]["bytes"]) == (True, 1, 5)
    assert quick["data"]["hashed"] is False
    assert [entry["path"] for entry in host["lockfiles"]] == ["uv.lock", "../requirements.txt"]
    assert set(host) == {"collected_at", "hostname", "code", "data", "lockfiles", "cpu", "gpus"}
