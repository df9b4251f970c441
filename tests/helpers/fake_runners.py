"""The fake GitHub's self-hosted runner endpoints and GitHub App installation tokens.

State and routes for `fake_github.FakeGitHub` (which validates every request against the
official description first): JIT registration, list, get and delete runners for repositories
(`repos/OWNER/REPO`) and organisations (`orgs/ORG`), and `POST /app/installations/ID/
access_tokens`, which accepts only a JWT of the configured App whose RS256 signature `openssl`
verifies against the App's public key, as GitHub does.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Reply = tuple[int, dict[str, str], Any]  # status, headers, body
MAX_JWT_LIFETIME = 600  # GitHub refuses an App JWT valid for more than 10 minutes
DEFAULT_LABELS = ("self-hosted", "Linux", "X64")  # read-only labels GitHub adds itself


@dataclass
class ActionsState:
    """Runners per scope, and the one App installation the fake knows."""

    runners: dict[int, dict[str, Any]] = field(default_factory=dict)
    scopes: dict[int, str] = field(default_factory=dict)  # runner id -> "repos/o/r" | "orgs/o"
    app_id: int = 4242
    installation_id: int = 77
    public_key: Path | None = None  # PEM; None: every JWT is refused
    token_ttl: float = 3600.0
    issued: list[str] = field(default_factory=list)  # installation tokens, in order
    ids: itertools.count = field(default_factory=lambda: itertools.count(23))

    def add_runner(self, scope: str, name: str, status: str = "offline", busy: bool = False,
                   labels: tuple[str, ...] = ("self-hosted",), group: int = 1) -> dict[str, Any]:
        """A runner registered before the test (by someone, or an earlier service)."""
        runner_id = next(self.ids)
        runner = {
            "id": runner_id, "name": name, "os": "Linux", "status": status, "busy": busy,
            "runner_group_id": group, "ephemeral": True,
            "labels": [{"id": i + 1, "name": label,
                        "type": "read-only" if label in DEFAULT_LABELS else "custom"}
                       for i, label in enumerate(labels)],
        }
        self.runners[runner_id] = runner
        self.scopes[runner_id] = scope
        return runner

    def in_scope(self, scope: str) -> list[dict[str, Any]]:
        return [r for i, r in self.runners.items() if self.scopes[i] == scope]


def runner_route(state: ActionsState, method: str, parts: list[str], query: dict[str, str],
                 body: Any, base_url: str, *, may_write: bool = True) -> Reply | None:
    """The answer for a runner endpoint, or None when `parts` is not one."""
    if parts[:1] == ["repos"] and len(parts) >= 5:
        scope, rest = "/".join(parts[:3]), parts[3:]
    elif parts[:1] == ["orgs"] and len(parts) >= 4:
        scope, rest = "/".join(parts[:2]), parts[2:]
    else:
        return None
    if rest[:2] != ["actions", "runners"]:
        return None
    if method != "GET" and not may_write:
        return 403, {}, {"message": "Resource not accessible by integration",
                         "documentation_url": "https://docs.github.com/rest"}
    match method, rest[2:]:
        case "POST", ["generate-jitconfig"]:
            return _generate(state, scope, body)
        case "GET", []:
            return _list(state, scope, query, f"{base_url}/{scope}/actions/runners")
        case "GET", [runner_id] if runner_id.isdigit():
            found = _find(state, scope, int(runner_id))
            return (200, {}, found) if found else _not_found()
        case "DELETE", [runner_id] if runner_id.isdigit():
            return _delete(state, scope, int(runner_id))
    return None


def _generate(state: ActionsState, scope: str, body: dict[str, Any]) -> Reply:
    if any(r["name"] == body["name"] for r in state.in_scope(scope)):
        return 409, {}, {"message": f"Already exists - A runner with the name {body['name']}"
                         " already exists.", "documentation_url": "https://docs.github.com/rest"}
    runner = state.add_runner(scope, body["name"], labels=tuple(body["labels"]),
                              group=body["runner_group_id"])
    config = {"runner_id": runner["id"], "name": runner["name"], "scope": scope,
              "work_folder": body.get("work_folder", "_work")}
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    return 201, {}, {"runner": runner, "encoded_jit_config": encoded}


def _list(state: ActionsState, scope: str, query: dict[str, str], link_base: str) -> Reply:
    found = [r for r in state.in_scope(scope) if "name" not in query or r["name"] == query["name"]]
    per_page, page = min(int(query.get("per_page", 30)), 100), int(query.get("page", 1))
    chunk = found[(page - 1) * per_page: page * per_page]
    headers = {}
    if page * per_page < len(found):
        headers["Link"] = f'<{link_base}?per_page={per_page}&page={page + 1}>; rel="next"'
    return 200, headers, {"total_count": len(found), "runners": chunk}


def _find(state: ActionsState, scope: str, runner_id: int) -> dict[str, Any] | None:
    if state.scopes.get(runner_id) == scope:
        return state.runners[runner_id]
    return None


def _delete(state: ActionsState, scope: str, runner_id: int) -> Reply:
    runner = _find(state, scope, runner_id)
    if runner is None:
        return _not_found()
    if runner["busy"]:
        return 422, {}, {"message": "Bad request - Runner \"{}\" is still running a job\"".format(
            runner["name"]), "documentation_url": "https://docs.github.com/rest"}
    del state.runners[runner_id], state.scopes[runner_id]
    return 204, {}, None


def installation_token(state: ActionsState, path: str, jwt: str) -> tuple[Reply, str | None]:
    """`POST /app/installations/ID/access_tokens`: the reply, and the new token when issued."""
    parts = path.strip("/").split("/")
    if len(parts) != 4 or parts[:2] != ["app", "installations"] or parts[3] != "access_tokens":
        return _not_found(), None
    problem = jwt_problem(state, jwt)
    if problem:
        return (401, {}, {"message": problem,
                          "documentation_url": "https://docs.github.com/rest"}), None
    if parts[2] != str(state.installation_id):
        return _not_found(), None
    token = f"ghs_installation{len(state.issued) + 1}"
    state.issued.append(token)
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + state.token_ttl))
    return (201, {}, {"token": token, "expires_at": expires,
                      "permissions": {"administration": "write"},
                      "repository_selection": "selected"}), token


def jwt_problem(state: ActionsState, jwt: str) -> str | None:
    """Why GitHub would refuse this App JWT, or None."""
    pieces = jwt.split(".")
    if len(pieces) != 3:
        return "A JSON web token could not be decoded"
    try:
        header, claims = (json.loads(_unb64(p)) for p in pieces[:2])
        signature = _unb64(pieces[2])
    except ValueError:
        return "A JSON web token could not be decoded"
    now = time.time()
    if header.get("alg") != "RS256":
        return "'Expiration time' claim ('exp') and algorithm must be RS256"
    if claims.get("iss") not in (state.app_id, str(state.app_id)):
        return "Integration not found"
    if not (claims.get("iat", now + 1) <= now + 60 < claims.get("exp", 0) + 60):
        return "'Issued at' claim ('iat') must be an Integer representing a time in the past"
    if claims["exp"] - claims["iat"] > MAX_JWT_LIFETIME:
        return "'Expiration time' claim ('exp') is too far in the future"
    signed = f"{pieces[0]}.{pieces[1]}".encode()
    if state.public_key is None or not _verified(state.public_key, signed, signature):
        return "A JSON web token could not be decoded"
    return None


def _verified(public_key: Path, data: bytes, signature: bytes) -> bool:
    with tempfile.NamedTemporaryFile(suffix=".sig") as sig:
        sig.write(signature)
        sig.flush()
        done = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(public_key),
                               "-signature", sig.name], input=data, capture_output=True,
                              timeout=30, check=False)
    return done.returncode == 0


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as error:
        raise ValueError(str(error)) from None


def _not_found() -> Reply:
    return 404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
