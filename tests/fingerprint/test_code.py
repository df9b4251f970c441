"""Code facts from git in a repository made here: commit, ref, dirty state, diff hash, remote,
and the gate's own files left out."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from helpers.git_repo import GIT, git, lose_object

from repro_gate.errors import ErrorKind, GitFailedError
from repro_gate.fingerprint.code import collect_code, repository_root


def repo_with_commit(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "train.py").write_text("print('train')\n", encoding="utf-8")
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_a_clean_checkout_is_identified_by_its_commit(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)

    code = collect_code(repo)

    assert code == {"commit": git(repo, "rev-parse", "HEAD"), "ref": "refs/heads/main",
                    "dirty": False, "diff_sha256": None, "untracked_files": 0,
                    "remote_url": None}


def test_uncommitted_changes_and_untracked_files_make_it_dirty(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)
    (repo / "train.py").write_text("print('edited')\n", encoding="utf-8")
    (repo / "notes.txt").write_text("new\n", encoding="utf-8")
    diff = subprocess.run([*GIT, "-C", str(repo), "diff", "HEAD", "--no-ext-diff", "--binary"],
                          capture_output=True, check=True).stdout

    code = collect_code(repo)

    assert code["dirty"] is True and code["untracked_files"] == 1
    assert code["diff_sha256"] == hashlib.sha256(diff).hexdigest()


def test_the_gates_own_files_do_not_make_the_tree_dirty(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)
    output = repo / "repro-gate-out"
    (output / "runs" / "A").mkdir(parents=True)
    (output / "manifest.json").write_text("{}", encoding="utf-8")
    lock_dir = repo / ".repro-gate-lock"
    lock_dir.mkdir()
    (lock_dir / "lock").write_text("", encoding="utf-8")

    assert collect_code(repo)["dirty"] is True
    code = collect_code(repo, gate_files=[output, lock_dir, tmp_path / "elsewhere"])
    assert (code["dirty"], code["untracked_files"]) == (False, 0)


def test_a_detached_head_and_a_subdirectory_are_described(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)
    commit = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    (repo / "sub").mkdir()

    code = collect_code(repo / "sub")

    assert (code["commit"], code["ref"]) == (commit, "HEAD (detached)")
    assert repository_root(repo / "sub") == repo.resolve()


def test_the_remote_is_recorded_without_credentials(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)
    git(repo, "remote", "add", "upstream", "https://bot:ghp_secret@github.com/o/r.git?token=t")

    assert collect_code(repo)["remote_url"] == "https://github.com/o/r.git"


def test_without_a_commit_or_a_repository_the_reason_is_given(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")

    assert collect_code(plain)["reason"] == "not a git repository"
    assert collect_code(plain)["commit"] is None
    assert collect_code(empty)["commit"] is None
    assert collect_code(empty)["reason"] == "git repository has no commits"
    assert repository_root(plain) is None


def test_a_clone_missing_an_object_is_git_failed_with_gits_own_message(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path)
    lost = lose_object(repo, "train.py")
    (repo / "train.py").write_text("print('edited')\n", encoding="utf-8")  # its diff needs it

    with pytest.raises(GitFailedError) as failed:
        collect_code(repo)

    assert failed.value.kind is ErrorKind.GIT_FAILED
    assert failed.value.message.startswith(f"git -C {repo} diff HEAD --no-ext-diff --binary")
    assert failed.value.message.endswith(
        f" failed with exit code 128: fatal: unable to read {lost}")
