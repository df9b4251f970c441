"""The gate's own credentials: which variables hold them, and keeping them out of the training,
its logs and the manifest (see docs/security.md).

The gate needs these to publish; the training never does. User variables (a data bucket's key,
`HF_TOKEN`) are the training's business and pass through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

PUSHGATEWAY_USERNAME = "REPRO_GATE_PUSHGATEWAY_USERNAME"
PUSHGATEWAY_PASSWORD = "REPRO_GATE_PUSHGATEWAY_PASSWORD"
RUNNER_TOKEN = "REPRO_GATE_RUNNER_TOKEN"  # the runner service's token (reserved)

# Variables that hold the gate's credentials: never passed to a training.
GATE_CREDENTIALS = (
    "GITHUB_TOKEN",
    "INPUT_GITHUB-TOKEN",  # the action's `github-token` input, hyphen kept by the runner
    "ACTIONS_RUNTIME_TOKEN",
    PUSHGATEWAY_USERNAME,
    PUSHGATEWAY_PASSWORD,
    RUNNER_TOKEN,
)
# ACTIONS_ID_TOKEN_REQUEST_TOKEN and _URL: together they mint OIDC tokens for the job.
GATE_CREDENTIAL_PREFIXES = ("ACTIONS_ID_TOKEN_REQUEST_",)
# Kept from the training, but not masked: a user name is not secret, and masking a common word
# ("gate") would garble every log line holding it.
NOT_SECRET = (PUSHGATEWAY_USERNAME,)
# Variables that may hold a URL with a password in it (`https://user:pass@host`).
CREDENTIAL_URLS = ("INPUT_PUSHGATEWAY-URL", "REPRO_GATE_PUSHGATEWAY_URL")
# Shorter values are not masked: replacing every "1" in a log would destroy it, not protect it.
MIN_SECRET_LENGTH = 4
MASK = "***"

# Query parameters that carry a credential (lower case; `x-amz-*` and `x-goog-*` by prefix).
SECRET_QUERY_KEYS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth", "key", "api_key", "apikey",
    "password", "passwd", "pwd", "secret", "client_secret", "sig", "signature", "credential",
})
SECRET_QUERY_PREFIXES = ("x-amz-", "x-goog-")


def is_gate_credential(name: str) -> bool:
    """Whether the variable `name` holds one of the gate's own credentials."""
    return name in GATE_CREDENTIALS or name.startswith(GATE_CREDENTIAL_PREFIXES)


def credential_values(environ: Mapping[str, str]) -> list[str]:
    """The secret values the gate holds in `environ`, longest first (so masking a long value
    is not pre-empted by a shorter one inside it)."""
    values = {
        value
        for name, value in environ.items()
        if is_gate_credential(name) and name not in NOT_SECRET
    }
    for name in CREDENTIAL_URLS:
        password = _url_password(environ.get(name, ""))
        if password:
            values.add(password)
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def without_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` minus the gate's credential variables and any variable holding the same value
    as one of them (a copy under another name is the same secret)."""
    secrets = set(credential_values(environ))
    return {
        name: value
        for name, value in environ.items()
        if not is_gate_credential(name) and value not in secrets
    }


def mask(text: str, values: Sequence[str]) -> str:
    """`text` with every occurrence of each of `values` replaced by `***`."""
    for value in values:
        if value and value in text:
            text = text.replace(value, MASK)
    return text


class StreamMasker:
    """Masks `values` in a byte stream read in arbitrary chunks (a run's log): the end of a chunk
    that could begin a value is held back until the next chunk or `flush`, and nothing else, so
    ordinary output is never delayed."""

    def __init__(self, values: Sequence[str]) -> None:
        self._values = [value.encode("utf-8") for value in values if value]
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of `chunk` (and earlier ones held back) that are safe to write now."""
        if not self._values:
            return chunk
        data = self._pending + chunk
        for value in self._values:
            data = data.replace(value, MASK.encode())
        cut = len(data) - self._partial_value_at_end(data)
        self._pending = data[cut:]
        return data[:cut]

    def _partial_value_at_end(self, data: bytes) -> int:
        """The length of the longest end of `data` that is the start of a value."""
        longest = 0
        for value in self._values:
            for size in range(min(len(value) - 1, len(data)), longest, -1):
                if data.endswith(value[:size]):
                    longest = size
                    break
        return longest

    def flush(self) -> bytes:
        """The bytes held back: the stream has ended."""
        rest, self._pending = self._pending, b""
        return rest


def mask_document(document: Any, values: Sequence[str]) -> Any:
    """A JSON document with every string masked (keys too); the input is left unchanged."""
    if not values:
        return document
    if isinstance(document, str):
        return mask(document, values)
    if isinstance(document, dict):
        return {mask(str(k), values): mask_document(v, values) for k, v in document.items()}
    if isinstance(document, list | tuple):
        return [mask_document(item, values) for item in document]
    return document


# The password of a URL's user info (`https://user:token@host`), or a user name alone over
# http(s) (`https://token@host`, how some indexes take a token).
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@", re.IGNORECASE)
_URL_TOKEN = re.compile(r"(?P<head>\bhttps?://)[^/\s:@]+@", re.IGNORECASE)


def mask_url_credentials(text: str) -> str:
    """`text` with the credentials of every URL in it masked: `https://user:***@host/…`,
    `https://***@host/…`; the host and path stay, so a message still says which index."""
    return _URL_TOKEN.sub(rf"\g<head>{MASK}@", _URL_PASSWORD.sub(rf"\g<head>{MASK}@", text))


def strip_url_credentials(url: str) -> str:
    """`url` without user info and without credential-like query parameters.

    `https://user:tok@host/r.git?token=x&ref=main` -> `https://host/r.git?ref=main`; an
    scp-style `git@host:r.git` keeps its user name (it is not a secret), loses a password.
    """
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return _strip_scp_password(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in pairs if not _secret_query_key(key)]
    query = urlencode(kept) if len(kept) != len(pairs) else parts.query
    return urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))


def _secret_query_key(key: str) -> bool:
    lowered = key.lower()
    return lowered in SECRET_QUERY_KEYS or lowered.startswith(SECRET_QUERY_PREFIXES)


def _strip_scp_password(url: str) -> str:
    """`user:pass@host:path` -> `host:path`; `git@host:path` is left alone."""
    userinfo, at, rest = url.rpartition("@")
    if at and ":" in userinfo and "/" not in userinfo:
        return rest
    return url


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url.strip()).password
    except ValueError:
        return None
