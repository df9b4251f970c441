"""Whether a checkout's HEAD and its parents are in the history of the base repository's refs,
read from real git repositories: which refs count, and when only GitHub can tell."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.git_repo import git

from repro_gate.publish.github.ancestry import BaseRepository, Reach, read_checkout

BASE = BaseRepository("octo-org/trainer", "github.com")
BASE_URL = "https://github.com/octo-org/trainer.git"


def commit(repo: Path, name: str) -> str:
    (repo / "file.txt").write_text(name, encoding="utf-8")
    git(repo, "add", "file.txt")
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`main` at two commits, fetched from the base repository as `origin/main`."""
    path = tmp_path_factory.mktemp("template") / "checkout"
    path.mkdir()
    git(path, "init", "-q")
    commit(path, "first")
    commit(path, "second")
    git(path, "remote", "add", "origin", BASE_URL)
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    return path


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    """A copy of the template for one test to change."""
    return Path(shutil.copytree(template, tmp_path / "checkout"))


def test_the_tip_of_a_base_branch_and_its_parent_are_reachable(repo: Path) -> None:
    (repo / "sub").mkdir()
    checkout = read_checkout(repo / "sub", BASE)  # the checkout is found upwards
    assert checkout is not None
    assert checkout.root == repo
    assert checkout.head == git(repo, "rev-parse", "HEAD")
    assert checkout.parents == (git(repo, "rev-parse", "HEAD~1"),)
    assert set(checkout.reach.values()) == {Reach.REACHABLE}
    assert checkout.shallow is False


def test_a_local_commit_is_unreachable_however_its_local_branch_points(repo: Path) -> None:
    parent = git(repo, "rev-parse", "HEAD")
    head = commit(repo, "local")  # refs/heads/main points at it: a local branch proves nothing
    checkout = read_checkout(repo, BASE)
    assert checkout is not None
    assert checkout.reach == {head: Reach.UNREACHABLE, parent: Reach.REACHABLE}


def test_pull_request_refs_never_count(repo: Path) -> None:
    head = commit(repo, "from a fork")
    git(repo, "update-ref", "refs/remotes/pull/42/head", head)
    checkout = read_checkout(repo, BASE)
    assert checkout is not None and checkout.reach[head] is Reach.UNREACHABLE


def test_a_tag_counts_only_while_every_remote_is_the_base(repo: Path) -> None:
    head = commit(repo, "tagged")
    git(repo, "tag", "-a", "v1.0", "-m", "release")  # annotated: peeled to its commit
    checkout = read_checkout(repo, BASE)
    assert checkout is not None and checkout.reach[head] is Reach.REACHABLE
    git(repo, "remote", "add", "fork", "https://github.com/contributor/trainer")
    checkout = read_checkout(repo, BASE)
    assert checkout is not None and checkout.reach[head] is Reach.UNREACHABLE


@pytest.mark.parametrize("url", ["git@github.com:Octo-Org/Trainer.git",
                                 "ssh://git@github.com/octo-org/trainer",
                                 "https://x-access-token:secret@github.com/octo-org/trainer"])
def test_the_base_remote_is_recognised_in_each_url_form(repo: Path, url: str) -> None:
    git(repo, "remote", "set-url", "origin", url)
    checkout = read_checkout(repo, BASE)
    assert checkout is not None and set(checkout.reach.values()) == {Reach.REACHABLE}


def test_a_remote_of_another_repository_or_host_leaves_the_answer_to_github(repo: Path) -> None:
    for url in ("https://github.com/contributor/trainer", "https://ghe.example/octo-org/trainer"):
        git(repo, "remote", "set-url", "origin", url)
        checkout = read_checkout(repo, BASE)
        assert checkout is not None and set(checkout.reach.values()) == {Reach.UNKNOWN}


def test_a_shallow_checkout_cannot_place_what_lies_beyond_its_cut(repo: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD")
    head = commit(repo, "local")
    (repo / ".git" / "shallow").write_text(f"{tip}\n", encoding="ascii")
    checkout = read_checkout(repo, BASE)
    assert checkout is not None and checkout.shallow
    assert checkout.reach == {head: Reach.UNKNOWN, tip: Reach.REACHABLE}


def test_a_directory_outside_any_checkout_has_none(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert read_checkout(plain, BASE) is None
