"""The pull request of a fork's `workflow_run`, found by its head and checked against the commit
the gate ran on."""

from __future__ import annotations

import pytest
from helpers.fake_github import FakeGitHub
from helpers.github_env import FAST, HEAD_SHA

from repro_gate.errors import ReportInputError
from repro_gate.publish.github.client import GitHubClient
from repro_gate.publish.github.pulls import pull_request_for_head

REPOSITORY = "octo-org/trainer"
HEAD = "contributor:feature"


def client(github: FakeGitHub) -> GitHubClient:
    return GitHubClient(github.base_url, "ghs_actions", policy=FAST)


def test_the_open_pull_request_at_the_commit_is_found(github: FakeGitHub) -> None:
    github.add_pull(7, "someone:other", HEAD_SHA)
    github.add_pull(42, HEAD, HEAD_SHA)
    assert pull_request_for_head(client(github), REPOSITORY, HEAD, HEAD_SHA.upper()) == 42
    (request,) = github.requests_to("GET", "/pulls$")
    assert request.query == {"head": HEAD, "state": "open", "per_page": "100"}


def test_no_pull_request_from_the_head_means_nothing_to_post_on(github: FakeGitHub) -> None:
    github.add_pull(7, "someone:other", HEAD_SHA)
    with pytest.raises(ReportInputError) as caught:
        pull_request_for_head(client(github), REPOSITORY, HEAD, HEAD_SHA)
    assert str(caught.value) == (
        f"no open pull request from {HEAD} in {REPOSITORY}: nothing to post on")


def test_a_head_that_moved_on_is_not_posted_to(github: FakeGitHub) -> None:
    newer = "9" * 40
    github.add_pull(42, HEAD, newer)
    with pytest.raises(ReportInputError) as caught:
        pull_request_for_head(client(github), REPOSITORY, HEAD, HEAD_SHA)
    assert str(caught.value) == (
        f"not posting: pull request #42 from {HEAD} is now at {newer[:12]}, not"
        f" {HEAD_SHA[:12]} that the gate ran on")


def test_a_failed_lookup_is_one_line(github: FakeGitHub) -> None:
    github.down = True
    with pytest.raises(ReportInputError, match=f"^cannot look up the pull request from {HEAD}:"
                                               " GET .*HTTP 503"):
        pull_request_for_head(client(github), REPOSITORY, HEAD, HEAD_SHA)
