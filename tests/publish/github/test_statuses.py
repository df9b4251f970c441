"""Commit statuses: the body GitHub takes, the description cut to its 140 characters, and the
creator the token acts as."""

from __future__ import annotations

import pytest
from helpers.fake_github import FakeGitHub, Principal
from helpers.github_env import FAST, HEAD_SHA

from repro_gate.errors import GitHubError
from repro_gate.publish.github.client import GitHubClient
from repro_gate.publish.github.statuses import DESCRIPTION_LIMIT, clip, post_status

REPOSITORY = "octo-org/trainer"


def test_a_long_description_is_cut_to_one_line_of_140_characters() -> None:
    assert clip("reproducible\n  within  tolerance") == "reproducible within tolerance"
    cut = clip("word " * 100)
    assert len(cut) == DESCRIPTION_LIMIT and cut.endswith("…")


def test_a_status_is_posted_with_its_creator(github: FakeGitHub) -> None:
    github.tokens["ghp_person"] = Principal("octocat", app_slug=None)
    client = GitHubClient(github.base_url, "ghp_person", policy=FAST)
    status = post_status(client, REPOSITORY, HEAD_SHA, state="failure", context="repro-gate",
                         description="not reproducible: " + "x" * 200,
                         target_url="https://github.com/octo-org/trainer/actions/runs/1")
    assert status.creator == "octocat"
    (posted,) = github.statuses
    assert posted["id"] == status.id and posted["sha"] == HEAD_SHA
    assert (posted["state"], posted["context"]) == ("failure", "repro-gate")
    assert len(posted["description"]) == DESCRIPTION_LIMIT
    assert posted["target_url"] == "https://github.com/octo-org/trainer/actions/runs/1"


def test_no_target_url_is_left_out_of_the_body(github: FakeGitHub) -> None:
    client = GitHubClient(github.base_url, "ghs_actions", policy=FAST)
    post_status(client, REPOSITORY, HEAD_SHA, state="pending", context="repro-gate",
                description="running", target_url=None)
    (request,) = github.requests_to("POST", "/statuses/")
    assert request.body == {"state": "pending", "context": "repro-gate",
                            "description": "running"}


def test_a_read_only_token_is_refused_as_read_only(github: FakeGitHub) -> None:
    github.tokens["ghs_fork"] = Principal("github-actions[bot]", "github-actions",
                                          can_write=False)
    client = GitHubClient(github.base_url, "ghs_fork", policy=FAST)
    with pytest.raises(GitHubError) as caught:
        post_status(client, REPOSITORY, HEAD_SHA, state="success", context="repro-gate",
                    description="reproducible", target_url=None)
    assert caught.value.status == 403 and caught.value.read_only
    assert github.statuses == []
