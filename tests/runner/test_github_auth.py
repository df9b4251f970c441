"""The service's GitHub credentials: a token file read at each use, a GitHub App's JWT signed
RS256 with a key made here by `cryptography`, and installation tokens fetched from a loopback
stand-in for GitHub, reused while valid and fetched again before they expire."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from repro_gate.errors import ConfigError, GitHubAnswerError
from repro_gate.publish.github.client import RetryPolicy
from repro_gate.runner.github_auth import (
    AppInstallationToken,
    FileToken,
    rs256_signer,
    token_source,
)
from repro_gate.runner.runner_config import AppAuth, TokenFileAuth

NOW = 1_900_000_000.0
EXPIRES = "2030-03-17T18:46:40Z"  # NOW + 3600 s
FAST = RetryPolicy(budget=5, base_delay=0.01, max_delay=0.05, max_attempts=1)


def pem(key: Any, folder: Path) -> Path:
    path = folder / "app.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def part(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def test_a_token_file_is_read_at_each_use(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("ghs_first\n")
    tokens = FileToken(path)
    first = tokens.token()
    path.write_text("ghs_rotated")

    assert (first, tokens.token()) == ("ghs_first", "ghs_rotated")


@pytest.mark.parametrize(("text", "message"), [
    (None, "cannot read token file"),
    ("", "must hold one token on one line"),
    ("ghs_a ghs_b", "must hold one token on one line"),
])
def test_a_token_file_that_is_missing_or_not_one_token_is_one_line(
    text: str | None, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    if text is not None:
        path.write_text(text)

    with pytest.raises(ConfigError, match=message):
        FileToken(path).token()


def test_the_app_jwt_is_signed_rs256_and_backdated_against_clock_skew(
    rsa_key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    app = AppAuth(12345, 77, pem(rsa_key, tmp_path))
    tokens = AppInstallationToken(app, "http://127.0.0.1:9", clock=lambda: NOW,
                                  sign=rs256_signer())

    header, claims, signature = tokens.app_jwt().split(".")

    assert part(header) == {"alg": "RS256", "typ": "JWT"}
    assert part(claims) == {"iat": NOW - 60, "exp": NOW + 540, "iss": "12345"}
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    rsa_key.public_key().verify(raw, f"{header}.{claims}".encode(), padding.PKCS1v15(),
                                hashes.SHA256())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(InvalidSignature):
        other.public_key().verify(raw, f"{header}.{claims}".encode(), padding.PKCS1v15(),
                                  hashes.SHA256())


@pytest.mark.parametrize(("key", "message"), [
    ("ec", "RS256 needs an RSA key, not "),
    ("garbage", "cannot sign with it"),
])
def test_a_key_that_cannot_sign_rs256_is_one_line_naming_the_key(
    key: str, message: str, tmp_path: Path
) -> None:
    if key == "ec":
        path = pem(ec.generate_private_key(ec.SECP256R1()), tmp_path)
    else:
        path = tmp_path / "app.pem"
        path.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")

    with pytest.raises(ConfigError) as refused:
        rs256_signer()(b"data", path)

    assert str(refused.value).startswith(f"github.auth.app.private_key_file {path}: cannot sign")
    assert message in str(refused.value)


def test_the_configuration_names_the_token_source(tmp_path: Path) -> None:
    from_file = token_source(TokenFileAuth(tmp_path / "token"), "https://api.github.com")
    from_app = token_source(AppAuth(1, 2, tmp_path / "app.pem"), "https://api.github.com")

    assert isinstance(from_file, FileToken) and from_file.path == tmp_path / "token"
    assert isinstance(from_app, AppInstallationToken) and from_app.app.installation_id == 2


class GitHub:
    """A loopback stand-in for GitHub's installation token endpoint: each answer a new token."""

    def __init__(self, token_text: str = "ghs_installation{n}") -> None:
        self.requests: list[tuple[str, str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.requests.append((self.command, self.path,
                                       self.headers.get("Authorization", "")))
                body = json.dumps({"token": token_text.format(n=len(outer.requests)),
                                   "expires_at": EXPIRES}).encode()
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github() -> Iterator[GitHub]:
    stand_in = GitHub()
    yield stand_in
    stand_in.close()


def test_an_installation_token_is_reused_until_its_refresh_margin(
    github: GitHub, rsa_key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    now = [NOW]
    tokens = AppInstallationToken(AppAuth(12345, 77, pem(rsa_key, tmp_path)), github.url,
                                  policy=FAST, clock=lambda: now[0])
    expires = datetime.strptime(EXPIRES, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)

    first, reused = tokens.token(), tokens.token()
    now[0] = expires.timestamp() - 299  # less than the 300 s margin left
    refreshed = tokens.token()

    assert (first, reused, refreshed) == ("ghs_installation1", "ghs_installation1",
                                          "ghs_installation2")
    assert [(method, path) for method, path, _ in github.requests] == [
        ("POST", "/app/installations/77/access_tokens")] * 2
    assert all(auth.startswith("Bearer ey") and auth.count(".") == 2
               for _, _, auth in github.requests)


def test_an_installation_token_that_is_not_one_word_is_refused(
    rsa_key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    github = GitHub(token_text="ghs_one two")
    try:
        tokens = AppInstallationToken(AppAuth(1, 77, pem(rsa_key, tmp_path)), github.url,
                                      policy=FAST, clock=lambda: NOW)
        with pytest.raises(GitHubAnswerError, match="the answer's token is not one word"):
            tokens.token()
    finally:
        github.close()
