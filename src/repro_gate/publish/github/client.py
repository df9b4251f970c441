"""A small GitHub REST client on `requests`: retries, rate limits and a bounded total time.

Retry rules follow GitHub's guidance for the REST API: 5xx answers and connection errors are
retried with exponential backoff and jitter; 403/429 rate limiting waits for `retry-after`, else
for `x-ratelimit-reset` when no requests remain, else backs off (secondary limits). Other 4xx
answers (401, 404, 422, a plain 403) are never retried. Every wait counts against one time
budget for the whole client, so an outage cannot hold the gate for long.

The budget is a hard deadline: each exchange runs in a worker thread that the client stops
waiting for when the budget runs out (`publish.deadline`), so a server that trickles its answer
a byte at a time, which no socket timeout catches, is cut off too.

The token goes to the configured API only: a URL that an answer names (a `Link: rel="next"`, a
redirect) is followed when it has the API's scheme, host, port and path prefix, its path in
clean form (no `..`, plain or percent-encoded: `api_url.py`), and refused otherwise
(`GitHubAnswerError`) before anything is sent there. An answer is read up to
MAX_ANSWER_BYTES; a larger one is refused unread (`GitHubAnswerError`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urljoin

import requests

from repro_gate import __version__
from repro_gate.config.model import DEFAULT_REPORT_TIMEOUT
from repro_gate.errors import GitHubAnswerError, GitHubError, one_line
from repro_gate.publish.deadline import DeadlineExceeded, call_within
from repro_gate.publish.github.answers import json_body
from repro_gate.publish.github.api_url import on_api

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
# GitHub's largest answers (100 items a page) are a few hundred KiB; anything far larger is not
# an answer the API describes, and reading it all would cost the process its memory.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
READ_CHUNK = 64 * 1024
# Broken answers another attempt may get right; every other RequestException is not retried.
TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
             requests.exceptions.ContentDecodingError)


@dataclass(frozen=True)
class RetryPolicy:
    """How long the client may wait, in seconds, and how it backs off."""

    budget: float = DEFAULT_REPORT_TIMEOUT  # deadline of one phase: its requests and waits
    request_timeout: float = 15.0  # per HTTP call, the whole exchange
    base_delay: float = 1.0  # first backoff after a 5xx or a connection error
    max_delay: float = 30.0  # cap of one backoff
    secondary_wait: float = 60.0  # first wait on a rate limit that names no time
    max_attempts: int = 6


class GitHubClient:
    """Send requests to one GitHub API base URL (api.github.com or a GHES `/api/v3`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + self.policy.budget
        self._headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"repro-gate/{__version__}",
        }
        self._session = self._new_session()

    def _new_session(self) -> requests.Session:
        session = _ApiSession(self.inside)
        session.headers.update(self._headers)
        return session

    def inside(self, url: str) -> bool:
        """Whether `url` is on the configured API (`api_url.on_api`)."""
        return on_api(url, self.base_url)

    def next_page(self, response: requests.Response, method: str, path: str) -> str | None:
        """The answer's `Link: rel="next"` URL, or None; GitHubAnswerError when it leads off
        the API (the token is never sent there)."""
        link = response.links.get("next", {}).get("url")
        if link is None:
            return None
        url = urljoin(response.url, link)
        if not self.inside(url):
            raise GitHubAnswerError(method, path, response.status_code, f"its next-page link"
                                    f" {url[:200]} is not on {self.base_url}: not followed")
        return url

    def reset_budget(self) -> None:
        """Start a new time budget (one per reporting phase: start of the runs, end)."""
        self._deadline = self._clock() + self.policy.budget

    def remaining(self) -> float:
        """Seconds left in the time budget."""
        return max(0.0, self._deadline - self._clock())

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> requests.Response:
        """Send one request (path relative to the base URL, or an absolute URL on the API)."""
        url = path if path.startswith(("http://", "https://")) else self.base_url + path
        if not self.inside(url):
            raise GitHubAnswerError(method, path[:200], None, f"not on {self.base_url}: not sent")
        backoff = self.policy.base_delay
        rate_wait = self.policy.secondary_wait
        for attempt in range(1, self.policy.max_attempts + 1):
            last = attempt == self.policy.max_attempts
            if self.remaining() <= 0:
                raise GitHubError(method, path, None, "time budget for GitHub requests used up")
            timeout = min(self.policy.request_timeout, self.remaining())
            send = partial(self._exchange, method, path, url, params, json, timeout)
            try:
                response = call_within(send, timeout, f"{method} {path}")
            except DeadlineExceeded as error:
                # The abandoned exchange still holds its connection: start a clean session.
                self._session = self._new_session()
                if self.remaining() <= 0:  # the budget, not the server's own slowness
                    raise GitHubError(method, path, None, f"{error}: time budget for GitHub"
                                      " requests used up") from None
                if last:
                    raise GitHubError(method, path, None, str(error)) from None
                self._wait(method, path, _jitter(backoff), str(error))
                backoff = min(backoff * 2, self.policy.max_delay)
                continue
            except TRANSIENT as error:
                if last:
                    raise GitHubError(method, path, None, one_line(error)) from error
                self._wait(method, path, _jitter(backoff), one_line(error))
                backoff = min(backoff * 2, self.policy.max_delay)
                continue
            except requests.RequestException as error:  # an invalid header, URL or redirect
                raise GitHubError(method, path, None, one_line(error)) from None
            if response.status_code < 400:
                return response
            message = _error_message(response)
            if response.status_code >= 500 and not last:
                self._wait(method, path, _jitter(backoff), f"HTTP {response.status_code}")
                backoff = min(backoff * 2, self.policy.max_delay)
                continue
            if _is_rate_limited(response, message) and not last:
                wait = _rate_limit_wait(response)
                if wait is None:
                    wait, rate_wait = _jitter(rate_wait), min(rate_wait * 2, 3600.0)
                self._wait(method, path, wait, f"rate limited (HTTP {response.status_code})")
                continue
            raise GitHubError(method, path, response.status_code, message)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def paginate(
        self, path: str, params: Mapping[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the items of a list endpoint, 100 per page, following `Link: rel="next"`."""
        url: str | None = path
        query: Mapping[str, Any] | None = {**(params or {}), "per_page": 100}
        while url:
            response = self.request("GET", url, params=query)
            items = json_body(response, "GET", url)
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise GitHubAnswerError("GET", url, response.status_code,
                                        "the answer is not a list of JSON objects")
            yield from items
            url = self.next_page(response, "GET", url)
            query = None  # the next link carries the query string already

    def _exchange(self, method: str, path: str, url: str, params: Mapping[str, Any] | None,
                  json: Any, timeout: float) -> requests.Response:
        """One request and its whole answer, read up to MAX_ANSWER_BYTES."""
        response = self._session.request(method, url, params=params, json=json,
                                         timeout=timeout, stream=True)
        with response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                raise _too_large(method, path, response.status_code)
            body = bytearray()
            for chunk in response.iter_content(READ_CHUNK):
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise _too_large(method, path, response.status_code)
            response._content = bytes(body)  # what `.content`, `.json()` and `.text` read
        return response

    def _wait(self, method: str, path: str, seconds: float, why: str) -> None:
        # Waiting past the budget would only delay the same failure.
        if seconds >= self.remaining():
            raise GitHubError(
                method, path, None, f"{why}; waiting {seconds:.0f}s would exceed the time budget"
            )
        self._sleep(seconds)


class _ApiSession(requests.Session):
    """A session that follows a redirect only to the API (`inside`), so the token goes nowhere
    else; the target is checked before anything is read or sent."""

    def __init__(self, inside: Callable[[str], bool]) -> None:
        super().__init__()
        self._inside = inside

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        target = super().get_redirect_target(resp)
        if target is not None and not self._inside(urljoin(resp.url, target)):
            raise GitHubAnswerError(str(resp.request.method), str(resp.url)[:200],
                                    resp.status_code, f"a redirect to {target[:200]} leaves the"
                                    " API: not followed")
        return target


def _too_large(method: str, path: str, status: int) -> GitHubAnswerError:
    return GitHubAnswerError(method, path[:200], status, f"the answer is larger than"
                             f" {MAX_ANSWER_BYTES // (1024 * 1024)} MiB: not read")


def _jitter(delay: float) -> float:
    """Half fixed, half random, so concurrent clients spread out."""
    return delay / 2 + random.uniform(0, delay / 2)


def _is_rate_limited(response: requests.Response, message: str) -> bool:
    if response.status_code == 429:
        return True
    if response.status_code != 403:
        return False
    headers = response.headers
    return (
        "retry-after" in headers
        or headers.get("x-ratelimit-remaining") == "0"
        or "rate limit" in message.lower()
    )


def _rate_limit_wait(response: requests.Response) -> float | None:
    """Seconds GitHub asks us to wait, or None when it names no time."""
    headers = response.headers
    retry_after = headers.get("retry-after", "")
    if retry_after.strip().isdigit():
        return float(retry_after)
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") == "0" and reset.strip().isdigit():
        return max(0.0, float(reset) - time.time()) + 0.5  # reset is whole epoch seconds
    return None


def _error_message(response: requests.Response) -> str:
    try:
        body = response.json()
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
        return one_line(response.text) or response.reason or "error"
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        details = [
            e.get("message") or e.get("code")
            for e in body.get("errors") or []
            if isinstance(e, dict) and (e.get("message") or e.get("code"))
        ]
        return str(body["message"]) + (f" ({'; '.join(map(str, details))})" if details else "")
    return response.reason or "error"
