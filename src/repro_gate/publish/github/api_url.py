"""Whether a URL is on the configured GitHub API, judged by the path a server would serve.

A server decodes percent-escapes and resolves dot segments before it routes a request, so a
path that merely starts with the API's path can leave it: `/api/v3/../../x`, `/api/v3/%2e%2e/x`,
`/api/v3/..%2f..%2fx`. Such a path is refused whatever it resolves to: GitHub never names one,
and a path in clean form, as written and decoded, is served where its prefix says.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
DOT_SEGMENTS = (".", "..")


def on_api(url: str, api_url: str) -> bool:
    """Whether `url` has the scheme, host and port of `api_url`, no credentials, and a clean
    path under `api_url`'s path."""
    api, other = urlsplit(api_url), urlsplit(url)
    try:
        ports = [(part.port or DEFAULT_PORTS.get(part.scheme)) for part in (api, other)]
    except ValueError:  # a port that is not a number
        return False
    if (other.scheme, other.hostname, ports[1]) != (api.scheme, api.hostname, ports[0]):
        return False
    if other.username is not None or other.password is not None:
        return False
    prefix = api.path.rstrip("/") + "/"
    return clean(other.path) and (other.path + "/").startswith(prefix)


def clean(path: str) -> bool:
    """No `.` or `..` segment and no empty one inside, as written and percent-decoded (where
    `%2f` and a backslash separate segments too)."""
    decoded = unquote(path).replace("\\", "/")
    for form in (path, decoded):
        segments = form.split("/")[1:]
        if any(segment in DOT_SEGMENTS for segment in segments) or "" in segments[:-1]:
            return False
    return True
