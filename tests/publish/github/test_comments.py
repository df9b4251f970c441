"""The sticky pull-request comment: created once, updated in place, left alone when unchanged,
and never taken over from someone else who copied its marker."""

from __future__ import annotations

from helpers.fake_github import FakeGitHub
from helpers.github_env import FAST, PR_NUMBER

from repro_gate.publish.github.client import GitHubClient
from repro_gate.publish.github.comments import (
    find_sticky_comment,
    same_login,
    upsert_sticky_comment,
)

REPOSITORY = "octo-org/trainer"
MARKER = "<!-- repro-gate:train -->"
BOT = "github-actions[bot]"


def client(github: FakeGitHub) -> GitHubClient:
    return GitHubClient(github.base_url, "ghs_actions", policy=FAST)


def upsert(github: FakeGitHub, body: str, author: str = BOT) -> tuple[str, int]:
    result = upsert_sticky_comment(client(github), REPOSITORY, PR_NUMBER, marker=MARKER,
                                   body=body, author=author)
    return result.action, result.id


def test_logins_compare_case_insensitively() -> None:
    assert same_login("GitHub-Actions[bot]", BOT)
    assert not same_login("github-actions", BOT)
    assert not same_login(None, BOT)


def test_the_comment_is_created_then_updated_then_left_alone(github: FakeGitHub) -> None:
    created = upsert(github, f"first\n{MARKER}")
    assert created[0] == "created"
    assert upsert(github, f"second\n{MARKER}") == ("updated", created[1])
    assert upsert(github, f"second\n{MARKER}") == ("unchanged", created[1])
    (only,) = github.comments[PR_NUMBER]
    assert only["body"] == f"second\n{MARKER}"
    assert len(github.requests_to("PATCH", "/issues/comments/")) == 1


def test_a_copied_marker_by_someone_else_is_never_taken_over(github: FakeGitHub) -> None:
    copied = github.add_comment(PR_NUMBER, "contributor", f"look: {MARKER}")
    action, comment_id = upsert(github, f"result\n{MARKER}")
    assert action == "created" and comment_id != copied["id"]
    assert github.comments[PR_NUMBER][0]["body"] == f"look: {MARKER}"


def test_the_oldest_of_our_comments_with_the_marker_is_found(github: FakeGitHub) -> None:
    github.add_comment(PR_NUMBER, BOT, "no marker here")
    oldest = github.add_comment(PR_NUMBER, BOT, f"one\n{MARKER}")
    github.add_comment(PR_NUMBER, BOT, f"two\n{MARKER}")
    found = find_sticky_comment(client(github), REPOSITORY, PR_NUMBER, marker=MARKER, author=BOT)
    assert found is not None and found["id"] == oldest["id"]
    assert find_sticky_comment(client(github), REPOSITORY, PR_NUMBER,
                               marker="<!-- repro-gate:other -->", author=BOT) is None


def test_a_comment_past_the_first_page_is_found(github: FakeGitHub) -> None:
    for number in range(120):
        github.add_comment(PR_NUMBER, "reviewer", f"review {number}")
    ours = github.add_comment(PR_NUMBER, BOT, f"result\n{MARKER}")
    assert upsert(github, f"new result\n{MARKER}") == ("updated", ours["id"])
