"""The REST client against the fake API: headers, retries, rate limits, budget, GHES, and the
token sent nowhere but the configured API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_github import Answer, FakeGitHub
from helpers.github_env import FAST, HEAD_SHA
from helpers.runner_files import token_file, write_config

from repro_gate.errors import GitHubAnswerError
from repro_gate.publish.github.client import GitHubClient, GitHubError, RetryPolicy
from repro_gate.runner.registration import Registrar
from repro_gate.runner.runner_config import load_runner_config

REPO = "octo-org/trainer"
STATUS = {"state": "success", "context": "repro-gate", "description": "bit-for-bit reproducible"}


def client_for(github: FakeGitHub, policy: RetryPolicy = FAST) -> GitHubClient:
    return GitHubClient(github.base_url, "ghs_actions", policy=policy)


def post_status(client: GitHubClient) -> int:
    return client.request("POST", f"/repos/{REPO}/statuses/{HEAD_SHA}", json=STATUS).status_code


def test_sends_api_version_accept_and_token(github: FakeGitHub) -> None:
    assert post_status(client_for(github)) == 201
    headers = github.seen[0].headers
    assert headers["Accept"] == "application/vnd.github+json"
    assert headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert headers["Authorization"] == "Bearer ghs_actions"
    assert github.statuses[0]["state"] == "success"


def test_retries_502_then_succeeds(github: FakeGitHub) -> None:
    github.script(
        "POST",
        "/statuses/",
        Answer(502, body={"message": "Server Error"}),
        Answer(502, body={"message": "Server Error"}),
    )
    assert post_status(client_for(github)) == 201
    assert len(github.requests_to("POST", "/statuses/")) == 3
    assert len(github.statuses) == 1


def test_retries_a_reset_connection(github: FakeGitHub) -> None:
    github.script("POST", "/statuses/", Answer(reset=True))
    assert post_status(client_for(github)) == 201
    assert len(github.requests_to("POST", "/statuses/")) == 2


def test_403_with_retry_after_waits_that_long(github: FakeGitHub) -> None:
    github.script(
        "POST",
        "/statuses/",
        Answer(
            403,
            headers={"retry-after": "1"},
            body={"message": "You have exceeded a secondary rate limit."},
        ),
    )
    assert post_status(client_for(github)) == 201
    first, second = github.requests_to("POST", "/statuses/")
    assert second.at - first.at >= 1.0


def test_429_waits_for_ratelimit_reset(github: FakeGitHub) -> None:
    reset = int(time.time()) + 1
    github.script(
        "POST",
        "/statuses/",
        Answer(
            429,
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
            body={"message": "API rate limit exceeded"},
        ),
    )
    assert post_status(client_for(github)) == 201
    _, second = github.requests_to("POST", "/statuses/")
    assert second.at >= reset


def test_secondary_limit_without_headers_backs_off(github: FakeGitHub) -> None:
    github.script(
        "POST",
        "/statuses/",
        Answer(403, body={"message": "You have exceeded a secondary rate limit. Please wait."}),
    )
    assert post_status(client_for(github)) == 201
    assert len(github.requests_to("POST", "/statuses/")) == 2


def test_rate_limit_longer_than_the_budget_fails_at_once(github: FakeGitHub) -> None:
    github.script(
        "POST",
        "/statuses/",
        Answer(403, headers={"retry-after": "3600"}, body={"message": "secondary rate limit"}),
    )
    started = time.monotonic()
    with pytest.raises(GitHubError, match="time budget"):
        post_status(client_for(github))
    assert time.monotonic() - started < 1.0
    assert len(github.requests_to("POST", "/statuses/")) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (422, "Validation Failed"),
        (404, "Not Found"),
        (401, "Bad credentials"),
        (403, "Resource not accessible by integration"),
    ],
)
def test_client_errors_are_not_retried(github: FakeGitHub, status: int, message: str) -> None:
    github.script("POST", "/statuses/", Answer(status, body={"message": message}))
    with pytest.raises(GitHubError) as raised:
        post_status(client_for(github))
    assert raised.value.status == status
    assert message in str(raised.value)
    assert len(github.requests_to("POST", "/statuses/")) == 1


def test_outage_gives_up_within_the_budget(github: FakeGitHub) -> None:
    github.down = True
    policy = RetryPolicy(
        budget=1.0, request_timeout=0.5, base_delay=0.1, max_delay=0.2, max_attempts=100
    )
    started = time.monotonic()
    with pytest.raises(GitHubError):
        post_status(client_for(github, policy))
    assert time.monotonic() - started < 1.5
    assert len(github.requests_to("POST", "/statuses/")) >= 3


def test_ghes_base_url_with_api_v3_prefix() -> None:
    ghes = FakeGitHub(prefix="/api/v3").start()
    try:
        assert ghes.base_url.endswith("/api/v3")
        assert post_status(client_for(ghes)) == 201
        assert ghes.seen[0].path == f"/repos/{REPO}/statuses/{HEAD_SHA}"
    finally:
        ghes.stop()
    assert ghes.violations == []


def test_paginates_with_link_headers(github: FakeGitHub) -> None:
    for i in range(230):
        github.add_comment(7, "someone", f"comment {i}")
    bodies = [c["body"] for c in client_for(github).paginate(f"/repos/{REPO}/issues/7/comments")]
    assert bodies == [f"comment {i}" for i in range(230)]
    pages = github.requests_to("GET", "/issues/7/comments")
    assert [p.query.get("page", "1") for p in pages] == ["1", "2", "3"]
    assert all(p.query["per_page"] == "100" for p in pages)


def test_the_fake_api_rejects_what_github_would(github: FakeGitHub) -> None:
    client = client_for(github)
    with pytest.raises(GitHubError) as raised:
        client.request("POST", f"/repos/{REPO}/check-runs", json={"name": "repro-gate"})
    assert raised.value.status == 422
    with pytest.raises(GitHubError):
        client.request("POST", f"/repos/{REPO}/statuses/{HEAD_SHA}", json={"state": "passed"})
    assert len(github.violations) == 2
    assert "head_sha" in github.violations[0]
    github.violations.clear()  # seen and checked: these were sent on purpose


@pytest.fixture
def elsewhere() -> Iterator[FakeGitHub]:
    """A second API on another port: where a hostile answer would send the token."""
    other = FakeGitHub().start()
    yield other
    other.stop()


@pytest.mark.parametrize("where", ["other port", "other host name", "other scheme"])
def test_a_next_link_off_the_api_is_refused_and_gets_no_token(
    github: FakeGitHub, elsewhere: FakeGitHub, where: str
) -> None:
    own_port = github.base_url.rsplit(":", 1)[1]
    target = {"other port": elsewhere.base_url,
              "other host name": f"http://localhost:{own_port}",  # the same server, by name
              "other scheme": f"https://127.0.0.1:{own_port}"}[where]
    link = f'<{target}/repos/{REPO}/issues/7/comments?page=2>; rel="next"'
    github.script("GET", "/issues/7/comments", Answer(200, headers={"Link": link}, body=[]))
    with pytest.raises(GitHubAnswerError) as raised:
        list(client_for(github).paginate(f"/repos/{REPO}/issues/7/comments"))
    assert f"its next-page link {target}/repos/" in str(raised.value)
    assert f"is not on {github.base_url}: not followed" in str(raised.value)
    assert elsewhere.seen == [] and len(github.seen) == 1  # nothing went anywhere else


def test_the_runner_list_follows_no_link_off_the_api(
    tmp_path: Path, github: FakeGitHub, elsewhere: FakeGitHub
) -> None:
    link = f'<{elsewhere.base_url}/repos/{REPO}/actions/runners?page=2>; rel="next"'
    github.script("GET", "/actions/runners$", Answer(200, headers={"Link": link},
                                                       body={"total_count": 0, "runners": []}))
    config = write_config(tmp_path, {"repository": REPO, "api_url": github.base_url,
                                     "auth": {"token_file": token_file(tmp_path).name}})
    with pytest.raises(GitHubAnswerError, match=r"next-page link .* not followed"):
        Registrar(load_runner_config(config), policy=FAST).list_runners()
    assert elsewhere.seen == []


def test_a_redirect_off_the_api_is_refused_and_gets_no_token(
    github: FakeGitHub, elsewhere: FakeGitHub
) -> None:
    moved = f"{elsewhere.base_url}/repos/{REPO}/statuses/{HEAD_SHA}"
    github.script("POST", "/statuses/", Answer(307, headers={"Location": moved}))
    with pytest.raises(GitHubAnswerError, match=f"a redirect to {moved} leaves the API"):
        post_status(client_for(github))
    assert elsewhere.seen == []


def test_a_redirect_inside_the_api_is_followed(github: FakeGitHub) -> None:
    moved = f"{github.base_url}/repos/{REPO}/statuses/{HEAD_SHA}"
    github.script("POST", "/statuses/", Answer(307, headers={"Location": moved}))
    assert post_status(client_for(github)) == 201
    assert len(github.requests_to("POST", "/statuses/")) == 2


def test_an_absolute_url_off_the_api_is_not_sent(github: FakeGitHub, elsewhere: FakeGitHub
                                                  ) -> None:
    with pytest.raises(GitHubAnswerError, match="not sent"):
        client_for(github).request("GET", f"{elsewhere.base_url}/repos/{REPO}/pulls")
    assert elsewhere.seen == []


def test_a_page_that_is_not_a_list_of_objects_is_refused(github: FakeGitHub) -> None:
    github.script("GET", "/issues/7/comments", Answer(200, body={"message": "hi"}))
    with pytest.raises(GitHubAnswerError, match="HTTP 200: the answer is not a list of JSON"):
        list(client_for(github).paginate(f"/repos/{REPO}/issues/7/comments"))
