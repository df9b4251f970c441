"""The service's GitHub credentials: a token read from a file, or a GitHub App installation token.

An installation token lives one hour; it is fetched with a JWT signed by the App's private key
(RS256, 10 minutes at most, issued a minute in the past against clock skew) and fetched again
when less than `refresh_margin` is left. A JWT is three base64url parts, so it is put together
here; the RS256 signature comes from `cryptography` (what PyJWT signs RS256 with) when installed,
else from the `openssl` command line, present on every distribution the NVIDIA Container Toolkit
supports (`repro-gate[runner]` installs cryptography). With neither, App authentication is a
one-line MissingDependencyError. The tests sign with both and verify with openssl.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from repro_gate.errors import ConfigError, GitHubAnswerError, MissingDependencyError, one_line
from repro_gate.publish.github.answers import json_object
from repro_gate.publish.github.client import GitHubClient, RetryPolicy
from repro_gate.runner.runner_config import AppAuth, TokenFileAuth

JWT_BACKDATE = 60  # seconds: GitHub's advice against clock drift
JWT_LIFETIME = 540  # seconds after iat + backdate: under GitHub's 10-minute maximum


class TokenSource(Protocol):
    """Something that hands out a currently valid token."""

    def token(self) -> str: ...


@dataclass
class FileToken:
    """The token in a file, read at each use."""

    path: Path

    def token(self) -> str:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigError(f"cannot read token file {self.path}: {one_line(error)}") from None
        if not text or any(c.isspace() for c in text):
            raise ConfigError(f"token file {self.path} must hold one token on one line")
        return text


@dataclass
class InstallationToken:
    """A token and when it stops working (epoch seconds)."""

    value: str
    expires_at: float


class AppInstallationToken:
    """Installation tokens of a GitHub App, cached and refreshed before expiry."""

    def __init__(
        self,
        app: AppAuth,
        api_url: str,
        *,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        sign: Callable[[bytes, Path], bytes] | None = None,
    ) -> None:
        self.app = app
        self.api_url = api_url
        self.policy = policy
        self._clock = clock
        self._sign = sign or rs256_signer()
        self._current: InstallationToken | None = None
        self._lock = threading.Lock()  # one refresh at a time when slots register together

    def token(self) -> str:
        with self._lock:
            current = self._current
            if current is None or current.expires_at - self._clock() < self.app.refresh_margin:
                current = self._current = self._fetch()
            return current.value

    def _fetch(self) -> InstallationToken:
        path = f"/app/installations/{self.app.installation_id}/access_tokens"
        client = GitHubClient(self.api_url, self.app_jwt(), policy=self.policy)
        answer = json_object(client.request("POST", path), "POST", path)
        token = answer.text("token")
        if not token.isprintable() or any(c.isspace() for c in token):  # it becomes a header
            raise GitHubAnswerError("POST", path, answer.status, "the answer's token is not"
                                    " one word")
        return InstallationToken(token, answer.time("expires_at"))

    def app_jwt(self) -> str:
        """A JWT that authenticates as the App itself."""
        now = int(self._clock())
        header = {"alg": "RS256", "typ": "JWT"}
        claims = {"iat": now - JWT_BACKDATE, "exp": now + JWT_LIFETIME, "iss": str(self.app.app_id)}
        signing_input = f"{_b64(json.dumps(header))}.{_b64(json.dumps(claims))}".encode()
        signature = self._sign(signing_input, self.app.private_key_file)
        return f"{signing_input.decode()}.{_b64(signature)}"


def token_source(auth: AppAuth | TokenFileAuth, api_url: str,
                 policy: RetryPolicy | None = None) -> TokenSource:
    """The token source the configuration names."""
    if isinstance(auth, TokenFileAuth):
        return FileToken(auth.token_file)
    return AppInstallationToken(auth, api_url, policy=policy)


def rs256_signer() -> Callable[[bytes, Path], bytes]:
    """RSASSA-PKCS1-v1_5 with SHA-256 (JWT's RS256) by `cryptography`, PyJWT's own backend for
    RS256, when installed; else by the openssl command."""
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise MissingDependencyError(
                "GitHub App authentication", "cryptography"
                " (pip install 'repro-gate[runner]') or the openssl command") from None
        return lambda data, key: _openssl_sign(openssl, data, key)

    def sign(data: bytes, key: Path) -> bytes:
        try:
            private = serialization.load_pem_private_key(key.read_bytes(), password=None)
            if not isinstance(private, rsa.RSAPrivateKey):
                raise TypeError(f"RS256 needs an RSA key, not {type(private).__name__}")
            return private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        except (OSError, ValueError, TypeError, AttributeError) as error:
            raise ConfigError(f"github.auth.app.private_key_file {key}: cannot sign with it:"
                              f" {one_line(error)}") from None

    return sign


def _openssl_sign(openssl: str, data: bytes, key: Path) -> bytes:
    completed = subprocess.run([openssl, "dgst", "-sha256", "-sign", str(key)], input=data,
                               capture_output=True, timeout=30, check=False)
    if completed.returncode != 0:
        problem = one_line(completed.stderr.decode(errors="replace")) or "failed"
        raise ConfigError(f"github.auth.app.private_key_file {key}: cannot sign with it:"
                          f" {problem}")
    return completed.stdout


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

