"""Fork safety: outside code is refused on a self-hosted runner of a public repository, and a
fork's head checked out by `pull_request_target` anywhere, unless the workflow allows it.

Checkouts are real git repositories; GitHub's compare endpoint, asked about a shallow checkout,
is the local fake API (tests/helpers/fake_github.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import FakeGitHub
from helpers.git_repo import git
from helpers.github_env import pull_request_payload

from repro_gate.errors import ForkRefusedError
from repro_gate.publish.github.fork_safety import (
    FORK_SAFE_DOCS,
    ForkRisk,
    check_fork_safety,
    checked_out_commits,
    fork_risk,
    read_pull_request,
)

REPOSITORY = "octo-org/trainer"
NOT_PLACED = f"is not in the history of any branch or tag of {REPOSITORY}"


def commit(repo: Path, name: str) -> str:
    (repo / f"{name}.txt").write_text(name, encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout whose `main` is the base repository's `origin/main`."""
    path = tmp_path_factory.mktemp("template") / "checkout"
    path.mkdir()
    git(path, "init", "-q")
    commit(path, "first")
    git(path, "remote", "add", "origin", f"https://github.com/{REPOSITORY}")
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    return path


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    """A copy of the template for one test to change."""
    return Path(shutil.copytree(template, tmp_path / "checkout"))


def environment(tmp_path: Path, payload: dict[str, Any], **variables: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload), encoding="utf-8")
    return {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_SERVER_URL": "https://github.com",
            "RUNNER_ENVIRONMENT": "self-hosted", **variables}


def public(payload: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = payload or pull_request_payload(fork=True)
    payload["repository"] = {"full_name": REPOSITORY, "private": False,
                             "default_branch": "main"}
    return payload


def test_a_fork_pull_request_is_read_from_the_payload() -> None:
    pull = read_pull_request(public(), {})
    assert pull is not None and pull.from_fork and pull.public
    assert pull.describe() == ("pull request #42 comes from the fork contributor/trainer of"
                               " the public repository octo-org/trainer")
    head = pull_request_payload()["pull_request"]["head"]["sha"]
    assert pull.commits == frozenset({head})
    assert read_pull_request({}, {}) is None


def test_a_deleted_fork_is_still_not_the_base_repository() -> None:
    payload = public()
    payload["pull_request"]["head"]["repo"] = None
    payload["repository"]["private"] = True
    pull = read_pull_request(payload, {})
    assert pull is not None and pull.from_fork and not pull.public
    assert pull.describe() == "pull request #42 comes from a deleted fork of octo-org/trainer"


def test_a_refusal_points_at_the_fork_safe_workflow_and_the_input_that_allows_it() -> None:
    risk = ForkRisk("the code is a fork's", "it would run here")
    assert risk.refusal() == (f"refused: the code is a fork's: it would run here; use the"
                              f" fork-safe workflow ({FORK_SAFE_DOCS}) or set"
                              " allow-fork-pull-requests: true")
    assert risk.warning().startswith("allow-fork-pull-requests is true: running anyway: ")


def test_a_github_hosted_runner_runs_a_fork_pull_request(tmp_path: Path) -> None:
    environ = environment(tmp_path, public(), RUNNER_ENVIRONMENT="github-hosted")
    assert fork_risk(environ, tmp_path) is None


def test_a_private_repository_is_not_checked(tmp_path: Path) -> None:
    payload = public()
    payload["repository"]["visibility"] = "internal"
    assert fork_risk(environment(tmp_path, payload), tmp_path) is None


def test_a_working_directory_outside_a_checkout_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    environ = environment(tmp_path, public())
    with pytest.raises(ForkRefusedError) as caught:
        check_fork_safety(environ, plain, allowed=False)
    assert caught.value.exit_code == 3
    assert str(caught.value).startswith(
        "refused: the working directory is not in a git checkout (pull_request event)")
    warning = check_fork_safety(environ, plain, allowed=True)
    assert warning is not None and warning.startswith("allow-fork-pull-requests is true")


def test_a_commit_of_a_base_branch_runs(tmp_path: Path, repo: Path) -> None:
    assert check_fork_safety(environment(tmp_path, public()), repo, allowed=False) is None


def test_a_commit_in_no_base_branch_is_refused(tmp_path: Path, repo: Path) -> None:
    head = commit(repo, "fork")
    risk = fork_risk(environment(tmp_path, public()), repo)
    assert risk is not None
    assert risk.situation == (f"the checked-out commit {head[:12]} {NOT_PLACED} (pull_request"
                              " event), on a self-hosted runner")


def test_githubs_merge_of_two_base_commits_runs_a_hand_made_one_does_not(
    tmp_path: Path, repo: Path,
) -> None:
    git(repo, "checkout", "-q", "-b", "side", "HEAD")
    commit(repo, "side")
    git(repo, "update-ref", "refs/remotes/origin/side", "HEAD")
    git(repo, "checkout", "-q", "main")
    commit(repo, "main")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "side")
    merge = git(repo, "rev-parse", "HEAD")
    named = environment(tmp_path, public(), GITHUB_SHA=merge)
    assert fork_risk(named, repo) is None
    risk = fork_risk(environment(tmp_path, public()), repo)
    assert risk is not None and f"{merge[:12]} {NOT_PLACED}" in risk.situation


def test_a_shallow_checkout_without_a_token_cannot_be_placed(tmp_path: Path,
                                                             repo: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD")
    commit(repo, "fork")
    (repo / ".git" / "shallow").write_text(f"{tip}\n", encoding="ascii")
    risk = fork_risk(environment(tmp_path, public(), GITHUB_BASE_REF="main"), repo)
    assert risk is not None
    assert "cannot be told: the checkout is shallow and there is no GitHub token" in (
        risk.situation)


def test_a_shallow_checkout_asks_github_about_the_base_branches(
    tmp_path: Path, repo: Path, github: FakeGitHub,
) -> None:
    tip = git(repo, "rev-parse", "HEAD")
    head = commit(repo, "merged upstream")
    (repo / ".git" / "shallow").write_text(f"{tip}\n", encoding="ascii")
    environ = environment(tmp_path, public(), GITHUB_BASE_REF="release", GITHUB_HEAD_REF="main",
                          GITHUB_API_URL=github.base_url, GITHUB_TOKEN="ghs_actions")
    github.set_history({tip: [], head: [tip]}, {"release": tip, "main": head})
    assert fork_risk(environ, repo, timeout=4.0) is None
    asked = [s.path.rsplit("/compare/", 1)[1] for s in github.requests_to("GET", "/compare/")]
    assert asked == [f"release...{head}", f"main...{head}"]  # in order, stopping at the first
    github.set_history({tip: [], head: [tip]}, {"release": tip, "main": tip})
    risk = fork_risk(environ, repo, timeout=4.0)
    assert risk is not None and NOT_PLACED in risk.situation


def test_pull_request_target_refuses_the_forks_head_on_any_runner(tmp_path: Path,
                                                                  repo: Path) -> None:
    head = commit(repo, "fork head")
    payload = public()
    payload["pull_request"]["head"]["sha"] = head
    environ = environment(tmp_path, payload, GITHUB_EVENT_NAME="pull_request_target",
                          RUNNER_ENVIRONMENT="github-hosted")
    assert checked_out_commits(repo)[0] == head
    risk = fork_risk(environ, repo)
    assert risk is not None
    assert risk.situation.endswith(f"and its code is checked out (HEAD {head[:12]})")
    assert "runs with secrets" in risk.why
    same_repository = public(pull_request_payload(fork=False))
    same_repository["pull_request"]["head"]["sha"] = head
    assert fork_risk(environment(tmp_path, same_repository,
                                 GITHUB_EVENT_NAME="pull_request_target",
                                 RUNNER_ENVIRONMENT="github-hosted"), repo) is None
