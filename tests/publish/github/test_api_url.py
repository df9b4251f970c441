"""Whether a URL is on the configured GitHub API: the scheme, host, port and path prefix of
the URL a server would serve, so a path that climbs out, plainly or percent-encoded, is off it."""

from __future__ import annotations

import pytest

from repro_gate.publish.github.api_url import clean, on_api

GHES = "https://ghe.example/api/v3"


@pytest.mark.parametrize("url", [
    "https://ghe.example/api/v3",
    "https://ghe.example/api/v3/repos/o/r/issues/1/comments?page=2",
    "https://ghe.example:443/api/v3/repos/o/r",
    "https://ghe.example/api/v3/repos/o/r/compare/main...feature%2Fx",  # a branch with a slash
    "https://ghe.example/api/v3/repos/o/my.repo/",
])
def test_a_url_under_the_api_path_is_on_it(url: str) -> None:
    assert on_api(url, GHES)


@pytest.mark.parametrize("url", [
    "https://ghe.example/api/v30/repos/o/r",
    "http://ghe.example/api/v3/repos/o/r",
    "https://ghe.example:8443/api/v3/repos/o/r",
    "https://evil.example/api/v3/repos/o/r",
    "https://user:pw@ghe.example/api/v3/repos/o/r",
    "https://ghe.example:port/api/v3",
])
def test_another_scheme_host_port_or_prefix_is_off_it(url: str) -> None:
    assert not on_api(url, GHES)


@pytest.mark.parametrize("path", [
    "/api/v3/../../x",
    "/api/v3/repos/../../../x",
    "/api/v3/./../x",
    "/api/v3/%2e%2e/%2e%2e/x",
    "/api/v3/%2E%2E/x",
    "/api/v3/.%2e/x",
    "/api/v3/..%2f..%2fx",
    "/api/v3/..%5c..%5cx",
    "/api/v3//../x",
])
def test_a_path_that_climbs_out_is_off_it_plain_or_encoded(path: str) -> None:
    assert not clean(path)
    assert not on_api(f"https://ghe.example{path}?page=2", GHES)


def test_the_public_api_has_no_prefix_but_the_same_rules() -> None:
    assert on_api("https://api.github.com/repositories/1/issues?page=2", "https://api.github.com")
    assert on_api("https://api.github.com", "https://api.github.com")
    assert not on_api("https://api.github.com/repos/%2e%2e/x", "https://api.github.com")
