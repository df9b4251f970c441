"""The GitHub REST client: the token stays on the configured API, failures are retried by
GitHub's rules within one time budget, and list answers are followed page by page.

Requests go to the local fake API (tests/helpers/fake_github.py), which checks each one against
GitHub's REST description; the client's waits are recorded instead of slept.
"""

from __future__ import annotations

import re

import pytest
import requests
from helpers.fake_github import Answer, FakeGitHub
from helpers.github_env import FAST

from repro_gate.errors import GitHubAnswerError, GitHubError
from repro_gate.publish.github.client import GitHubClient, RetryPolicy

COMMENTS = "/repos/octo-org/trainer/issues/42/comments"


def client_for(github: FakeGitHub, waits: list[float],
               policy: RetryPolicy = FAST) -> GitHubClient:
    return GitHubClient(github.base_url, "ghs_actions", policy=policy, sleep=waits.append)


def test_a_url_is_on_the_api_only_with_its_scheme_host_port_and_prefix() -> None:
    ghes = GitHubClient("https://ghe.example/api/v3/", "token")
    assert ghes.base_url == "https://ghe.example/api/v3"
    assert ghes.inside("https://ghe.example/api/v3/repos/o/r")
    assert ghes.inside("https://ghe.example:443/api/v3/repos/o/r")
    assert not ghes.inside("https://ghe.example/api/v30/repos/o/r")
    assert not ghes.inside("http://ghe.example/api/v3/repos/o/r")
    assert not ghes.inside("https://ghe.example:8443/api/v3/repos/o/r")
    assert not ghes.inside("https://evil.example/api/v3/repos/o/r")
    assert not ghes.inside("https://user:pw@ghe.example/api/v3/repos/o/r")
    assert not ghes.inside("https://ghe.example:port/api/v3")


def test_a_request_off_the_api_is_never_sent(github: FakeGitHub) -> None:
    client = client_for(github, [])
    with pytest.raises(GitHubAnswerError, match=r"not on http://127\.0\.0\.1:\d+: not sent"):
        client.request("GET", "https://elsewhere.example/repos/o/r")
    assert github.seen == []


def test_a_server_error_is_retried_after_a_backoff(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(502, body={"message": "Bad Gateway"}))
    waits: list[float] = []
    response = client_for(github, waits).request("GET", COMMENTS)
    assert response.status_code == 200
    assert len(github.requests_to("GET", "/issues/42/comments")) == 2
    assert len(waits) == 1 and FAST.base_delay / 2 <= waits[0] <= FAST.base_delay


def test_a_client_error_is_not_retried_and_names_githubs_message(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(422, body={
        "message": "Validation Failed", "errors": [{"message": "body is too long"},
                                                   {"code": "missing_field"}]}))
    waits: list[float] = []
    with pytest.raises(GitHubError) as caught:
        client_for(github, waits).request("GET", COMMENTS)
    assert caught.value.status == 422
    assert caught.value.message == "Validation Failed (body is too long; missing_field)"
    assert waits == [] and len(github.seen) == 1


def test_a_rate_limit_waits_as_long_as_github_asks(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(
        403, headers={"retry-after": "3"}, body={"message": "You have exceeded a secondary"
                                                            " rate limit"}))
    waits: list[float] = []
    assert client_for(github, waits).request("GET", COMMENTS).status_code == 200
    assert waits == [3.0]


def test_a_wait_past_the_budget_fails_at_once(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(429, headers={"retry-after": "100"},
                                                         body={"message": "slow down"}))
    waits: list[float] = []
    with pytest.raises(GitHubError, match="waiting 100s would exceed the time budget"):
        client_for(github, waits).request("GET", COMMENTS)
    assert waits == []


def test_an_answer_slower_than_the_request_timeout_is_cut_off(github: FakeGitHub) -> None:
    policy = RetryPolicy(budget=3.0, request_timeout=0.2, base_delay=0.02, max_delay=0.02,
                         max_attempts=2)
    github.script("GET", r"/issues/42/comments$", Answer(delay=1.0, body=[]),
                  Answer(delay=1.0, body=[]))
    with pytest.raises(GitHubError) as caught:
        client_for(github, [], policy).request("GET", COMMENTS)
    assert caught.value.status is None
    # The gate's deadline and the socket's read timeout are both 0.2 s: either may say it first.
    assert caught.value.message.startswith(f"GET {COMMENTS}: no answer")
    assert "0.2" in caught.value.message


def test_a_list_is_followed_page_by_page(github: FakeGitHub) -> None:
    for number in range(150):
        github.add_comment(42, "someone", f"comment {number}")
    comments = list(client_for(github, []).paginate(COMMENTS))
    assert [c["body"] for c in comments] == [f"comment {n}" for n in range(150)]
    pages = github.requests_to("GET", "/issues/42/comments")
    assert [p.query for p in pages] == [{"per_page": "100"}, {"per_page": "100", "page": "2"}]


def test_a_next_page_off_the_api_is_refused(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(
        200, headers={"Link": '<https://evil.example/steal?page=2>; rel="next"'}, body=[]))
    with pytest.raises(GitHubAnswerError, match=r"next-page link https://evil\.example/steal"
                                                r"\?page=2 is not on http://127"):
        list(client_for(github, []).paginate(COMMENTS))


@pytest.mark.parametrize("climb", ["../../steal", "%2e%2e/%2E%2E/steal"])
def test_a_next_page_that_climbs_out_of_the_api_path_is_refused(climb: str) -> None:
    ghes = FakeGitHub(prefix="/api/v3").start()
    try:
        link = f"{ghes.base_url}/{climb}?page=2"
        ghes.script("GET", r"/issues/42/comments$",
                    Answer(200, headers={"Link": f'<{link}>; rel="next"'}, body=[]))
        with pytest.raises(GitHubAnswerError, match=f"next-page link {re.escape(link)} is not on"):
            list(client_for(ghes, []).paginate(COMMENTS))
    finally:
        ghes.stop()
    assert [seen.path for seen in ghes.seen] == ["/repos/octo-org/trainer/issues/42/comments"]
    assert ghes.violations == []


def test_a_list_answer_that_is_not_a_list_is_refused(github: FakeGitHub) -> None:
    github.script("GET", r"/issues/42/comments$", Answer(200, body={"items": []}))
    with pytest.raises(GitHubAnswerError, match="the answer is not a list of JSON objects"):
        list(client_for(github, []).paginate(COMMENTS))


def test_the_next_page_is_read_from_the_link_header() -> None:
    client = GitHubClient("https://api.github.com", "token")
    response = requests.Response()
    response.url = "https://api.github.com/repos/o/r/pulls?per_page=100"
    response.headers["Link"] = ('</repos/o/r/pulls?per_page=100&page=2>; rel="next",'
                                ' <https://api.github.com/repos/o/r/pulls?page=9>; rel="last"')
    assert client.next_page(response, "GET", "/repos/o/r/pulls") == (
        "https://api.github.com/repos/o/r/pulls?per_page=100&page=2")
    del response.headers["Link"]
    assert client.next_page(response, "GET", "/repos/o/r/pulls") is None
