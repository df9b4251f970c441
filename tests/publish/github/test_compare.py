"""Whether a commit is in a branch's history, asked of GitHub's compare endpoint."""

from __future__ import annotations

import pytest
from helpers.fake_github import Answer, FakeGitHub
from helpers.github_env import FAST

from repro_gate.errors import GitHubError
from repro_gate.publish.github.client import GitHubClient
from repro_gate.publish.github.compare import CompareStatus, compare

REPOSITORY = "octo-org/trainer"
ROOT, MIDDLE, TIP, FORK = "a" * 40, "b" * 40, "c" * 40, "f" * 40


@pytest.fixture
def client(github: FakeGitHub) -> GitHubClient:
    github.set_history({ROOT: [], MIDDLE: [ROOT], TIP: [MIDDLE], FORK: [MIDDLE]},
                       {"main": TIP, "release/1.0": MIDDLE})
    return GitHubClient(github.base_url, "ghs_actions", policy=FAST)


def test_only_identical_and_behind_are_in_the_history() -> None:
    assert {s for s in CompareStatus if s.in_history} == {CompareStatus.IDENTICAL,
                                                          CompareStatus.BEHIND}


def test_the_tip_and_its_ancestors_are_in_the_branch(client: GitHubClient) -> None:
    assert compare(client, REPOSITORY, "main", TIP) is CompareStatus.IDENTICAL
    assert compare(client, REPOSITORY, "main", ROOT) is CompareStatus.BEHIND


def test_a_commit_off_the_branch_is_not(client: GitHubClient) -> None:
    assert compare(client, REPOSITORY, "main", FORK) is CompareStatus.DIVERGED
    assert compare(client, REPOSITORY, "release/1.0", TIP) is CompareStatus.AHEAD


def test_a_slash_in_the_branch_is_sent_escaped(client: GitHubClient,
                                               github: FakeGitHub) -> None:
    compare(client, REPOSITORY, "release/1.0", ROOT)
    (request,) = github.requests_to("GET", "/compare/")
    raw_path = request.path.rsplit("/compare/", 1)[1]
    assert raw_path == f"release%2F1.0...{ROOT}"
    assert request.query == {"per_page": "1"}


def test_an_unknown_branch_or_commit_is_none(client: GitHubClient) -> None:
    assert compare(client, REPOSITORY, "gone", TIP) is None
    assert compare(client, REPOSITORY, "main", "e" * 40) is None


def test_an_answer_without_a_known_status_is_an_error(client: GitHubClient,
                                                      github: FakeGitHub) -> None:
    github.script("GET", "/compare/", Answer(200, body={"status": "sideways"}))
    with pytest.raises(GitHubError, match="the answer has no known status \\(got 'sideways'\\)"):
        compare(client, REPOSITORY, "main", TIP)
