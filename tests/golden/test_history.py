"""What git says about the golden file, in a real repository: the files changed since a commit
(untracked ones included), and the base branch's version of a file in a pull request."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.git_repo import git as run_git
from helpers.git_repo import lose_object

from repro_gate.errors import GitFailedError
from repro_gate.golden.history import ENV_BASE_REF, base_version, changed_since, git, repo_root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    run_git(root, "init", "-q")
    (root / "train.py").write_text("print(1)\n")
    (root / "golden").mkdir()
    (root / "golden" / "cpu-x.json").write_text('{"v": 1}\n')
    run_git(root, "add", ".")
    run_git(root, "commit", "-q", "-m", "first")
    return root


def test_git_gives_its_output_or_none_when_it_fails(repo: Path) -> None:
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main\n"
    assert git(repo, "rev-parse", "no-such-ref") is None
    assert repo_root(repo / "golden") == repo.resolve()


def test_outside_a_repository_there_is_no_root(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git looks no higher
    assert repo_root(tmp_path / "plain") is None
    assert changed_since(tmp_path / "plain", "HEAD") is None


def test_changed_files_since_a_commit_include_untracked_ones(repo: Path) -> None:
    commit = run_git(repo, "rev-parse", "HEAD")
    assert changed_since(repo, commit) == []
    (repo / "train.py").write_text("print(2)\n")
    (repo / "golden" / "new.py").write_text("")
    run_git(repo, "commit", "-q", "-am", "second")
    (repo / "notes.md").write_text("untracked\n")
    # Paths from the repository's root, whichever folder git runs in.
    assert changed_since(repo / "golden", commit) == ["golden/new.py", "notes.md", "train.py"]


def test_a_commit_not_in_the_clone_gives_none(repo: Path) -> None:
    assert changed_since(repo, "0" * 40) is None


def test_a_clone_missing_an_object_is_git_failed_not_no_answer(repo: Path) -> None:
    commit = run_git(repo, "rev-parse", "HEAD")
    lost = lose_object(repo, "train.py")
    (repo / "train.py").write_text("print(2)\n")

    with pytest.raises(GitFailedError, match=f"diff --name-only {commit} .* failed with exit"
                                             f" code 128: fatal: unable to read {lost}$"):
        changed_since(repo, commit)


def test_the_base_branch_s_version_of_a_file(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_git(repo, "checkout", "-q", "-b", "feature")
    (repo / "golden" / "cpu-x.json").write_text('{"v": 2}\n')
    run_git(repo, "commit", "-q", "-am", "re-bless")
    monkeypatch.setenv(ENV_BASE_REF, "main")
    assert base_version(repo, "golden/cpu-x.json") == ("main", '{"v": 1}\n')
    assert base_version(repo, "golden/absent.json") is None


def test_outside_a_pull_request_there_is_no_base_version(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_BASE_REF, raising=False)
    assert base_version(repo, "golden/cpu-x.json") is None
    monkeypatch.setenv(ENV_BASE_REF, "  ")
    assert base_version(repo, "golden/cpu-x.json") is None
