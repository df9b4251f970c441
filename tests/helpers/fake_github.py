"""A local stand-in for the GitHub REST API that checks every request against GitHub's OpenAPI.

It runs in a thread on a free loopback port, keeps state (check runs and their annotations,
commit statuses, comments per issue with their authors) and answers with GitHub's status codes,
bodies and `Link` pagination. A request the real API would reject (unknown path, bad parameter,
body against the operation's schema, missing API headers) is recorded in `violations`; the
`github` fixture fails the test when there is any.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import requests
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest

from helpers.fake_runners import ActionsState, installation_token, runner_route
from helpers.paths import FIXTURES

SPEC_PATH = FIXTURES / "github" / "openapi" / "api.github.com.subset.json"
# The spec's own server: requests are checked as if they had been sent there.
SPEC_SERVER = "https://api.github.com"
READ_ONLY = "Resource not accessible by integration"


@cache
def openapi() -> OpenAPI:
    """The OpenAPI description, loaded once per test session."""
    return OpenAPI.from_dict(json.loads(SPEC_PATH.read_text(encoding="utf-8")))


@dataclass
class Principal:
    """Who a token belongs to and what it may do."""

    login: str
    app_slug: str | None = None  # None: a user's personal token (no check runs)
    can_write: bool = True
    can_write_checks: bool = True


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str  # without the GHES prefix
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    at: float


@dataclass
class Answer:
    """A scripted answer; `reset` closes the connection without answering.

    Broken answers: `raw` is sent as the body instead of `body` as JSON; `delay` seconds pass
    before the answer; `length=False` sends no Content-Length (the body ends when the
    connection closes)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    reset: bool = False
    raw: bytes | None = None
    delay: float = 0.0
    length: bool = True


APP_USERS = {"github-actions": 41898282}


class FakeGitHub:
    """The fake API: start it, point the client at `base_url`, inspect the state afterwards."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix.rstrip("/")
        self.repository = "octo-org/trainer"
        self.tokens: dict[str, Principal] = {
            "ghs_actions": Principal("github-actions[bot]", app_slug="github-actions"),
        }
        self.seen: list[Seen] = []
        self.violations: list[str] = []
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.annotations: dict[int, list[dict[str, Any]]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.pulls: list[dict[str, Any]] = []  # open pull requests: add_pull
        # The repository's commits (SHA -> parents) and its branches and tags: set_history
        self.commits: dict[str, tuple[str, ...]] = {}
        self.refs: dict[str, str] = {}
        self.actions = ActionsState()  # self-hosted runners, the App installation (fake_runners)
        self.down = False  # every request answered 503, like an outage
        self._scripted: list[tuple[str, re.Pattern[str], deque[Answer]]] = []
        self._ids = itertools.count(1_000_001)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """What GITHUB_API_URL would be: `http://127.0.0.1:PORT` plus the GHES prefix."""
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def start(self) -> FakeGitHub:
        openapi()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, method: str, path_pattern: str, *answers: Answer) -> None:
        """Answer the next matching requests with `answers`, in order, then behave normally."""
        self._scripted.append((method, re.compile(path_pattern), deque(answers)))

    def add_comment(self, issue: int, login: str, body: str) -> dict[str, Any]:
        """A comment written by someone (a person or another App) before the gate runs."""
        with self._lock:
            owner, repo = self.repository.split("/")
            return self._new_comment(owner, repo, issue, Principal(login), body)

    def add_pull(self, number: int, head_label: str, head_sha: str) -> None:
        """An open pull request whose head is `head_label` ("owner:branch") at `head_sha`."""
        owner, _, branch = head_label.partition(":")
        self.pulls.append({
            "number": number,
            "state": "open",
            "head": {"label": head_label, "ref": branch, "sha": head_sha,
                     "user": {"login": owner}},
        })

    def set_history(self, commits: Mapping[str, Sequence[str]], refs: Mapping[str, str]) -> None:
        """The repository's git history (each commit's parents) and its branches and tags by
        name (`main`, `v1.0`), which the compare endpoint answers from."""
        self.commits = {sha: tuple(parents) for sha, parents in commits.items()}
        self.refs = dict(refs)

    def requests_to(self, method: str, pattern: str) -> list[Seen]:
        """The requests seen for `method` on paths matching `pattern`."""
        return [s for s in self.seen if s.method == method and re.search(pattern, s.path)]

    # -- request handling -------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        url = urlsplit(handler.path)
        path = url.path
        if not path.startswith(self.prefix + "/"):
            self._violation(f"{handler.command} {handler.path}: outside the API prefix")
            return self._send(handler, Answer(404, body={"message": "Not Found"}))
        path = path[len(self.prefix) :]
        query = dict(parse_qsl(url.query))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._violation(f"{handler.command} {path}: body is not JSON")
            return self._send(handler, Answer(400, body={"message": "Problems parsing JSON"}))
        with self._lock:
            self.seen.append(
                Seen(handler.command, path, query, body, dict(handler.headers), time.time())
            )
        problem = self._check_headers(handler) or self._check_openapi(handler, path, url.query, raw)
        if problem:
            self._violation(f"{handler.command} {path}: {problem}")
            return self._send(handler, Answer(422, body={"message": f"Invalid request: {problem}"}))
        if self.down:
            return self._send(handler, Answer(503, body={"message": "Service Unavailable"}))
        scripted = self._next_scripted(handler.command, path)
        if scripted is not None:
            return self._send(handler, scripted)
        token = handler.headers.get("Authorization", "").removeprefix("Bearer ")
        if path.startswith("/app/"):  # authenticated by the App's JWT, not by a token
            return self._send(handler, self._app_token(path, token))
        principal = self.tokens.get(token)
        if principal is None:
            return self._send(handler, Answer(401, body={"message": "Bad credentials"}))
        with self._lock:
            answer = self._route(handler.command, path, query, body, principal)
        self._send(handler, answer)

    def _check_headers(self, handler: BaseHTTPRequestHandler) -> str | None:
        if handler.headers.get("Accept") != "application/vnd.github+json":
            return f"Accept header is {handler.headers.get('Accept')!r}"
        if handler.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            return "X-GitHub-Api-Version header missing or wrong"
        if not handler.headers.get("Authorization", "").startswith("Bearer "):
            return "no bearer token"
        if not handler.headers.get("User-Agent"):
            return "no User-Agent (GitHub rejects requests without one)"
        return None

    def _check_openapi(
        self, handler: BaseHTTPRequestHandler, path: str, query: str, raw: bytes
    ) -> str | None:
        url = SPEC_SERVER + path + (f"?{query}" if query else "")
        headers = {"Content-Type": handler.headers.get("Content-Type", "application/json")}
        request = requests.Request(handler.command, url, data=raw or None, headers=headers)
        try:
            openapi().validate_request(RequestsOpenAPIRequest(request.prepare()))
        except Exception as error:  # openapi-core raises one class per kind of mismatch
            cause = error.__cause__ or error
            details = getattr(cause, "schema_errors", None)
            text = "; ".join(e.message for e in details) if details else str(cause)
            return f"{type(error).__name__}: {text}"[:800]
        return None

    def _next_scripted(self, method: str, path: str) -> Answer | None:
        with self._lock:
            for want, pattern, answers in self._scripted:
                if want == method and pattern.search(path) and answers:
                    return answers.popleft()
        return None

    def _violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)

    def _send(self, handler: BaseHTTPRequestHandler, answer: Answer) -> None:
        if answer.reset:
            # SO_LINGER 0 makes close() send RST: the client sees "connection reset by peer".
            handler.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            handler.close_connection = True
            handler.connection.close()
            return
        time.sleep(answer.delay)
        payload = b"" if answer.body is None else json.dumps(answer.body).encode()
        payload = payload if answer.raw is None else answer.raw
        handler.send_response(answer.status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        if answer.length:
            handler.send_header("Content-Length", str(len(payload)))
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        handler.send_header("x-ratelimit-limit", "1000")
        handler.send_header("x-ratelimit-resource", "core")
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        with contextlib.suppress(ConnectionError):  # a client that stopped reading (too large)
            handler.wfile.write(payload)

    # -- the API ----------------------------------------------------------------------------

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, who: Principal
    ) -> Answer:
        parts = path.strip("/").split("/")
        runners = runner_route(self.actions, method, parts, query, body, self.base_url,
                               may_write=who.can_write)
        if runners is not None:
            return Answer(runners[0], headers=runners[1], body=runners[2])
        if len(parts) < 3 or parts[0] != "repos":
            return Answer(404, body={"message": "Not Found"})
        owner, repo, rest = parts[1], parts[2], parts[3:]
        if method != "GET" and not who.can_write:
            return _forbidden(READ_ONLY)
        match method, rest:
            case "POST", ["check-runs"]:
                return self._create_check_run(owner, repo, body, who)
            case "PATCH", ["check-runs", run_id]:
                return self._update_check_run(int(run_id), body, who)
            case "GET", ["check-runs", run_id] if int(run_id) in self.check_runs:
                return Answer(200, body=self.check_runs[int(run_id)])
            case "POST", ["statuses", sha]:
                return self._create_status(owner, repo, sha, body, who)
            case "GET", ["pulls"]:
                return self._list_pulls(query)
            case "GET", ["compare", basehead]:
                return self._compare(owner, repo, unquote(basehead))
            case "GET", ["issues", number, "comments"]:
                return self._list_comments(owner, repo, int(number), query)
            case "POST", ["issues", number, "comments"]:
                return self._create_comment(owner, repo, int(number), body, who)
            case "PATCH", ["issues", "comments", comment_id]:
                return self._update_comment(int(comment_id), body, who)
        return Answer(404, body={"message": "Not Found"})

    def _app_token(self, path: str, jwt: str) -> Answer:
        with self._lock:
            (status, headers, body), token = installation_token(self.actions, path, jwt)
            if token:
                self.tokens[token] = Principal("repro-gate-runner[bot]", "repro-gate-runner")
        return Answer(status, headers=headers, body=body)

    def _create_check_run(self, owner: str, repo: str, body: dict, who: Principal) -> Answer:
        if who.app_slug is None:
            return _forbidden("You must authenticate via a GitHub App.")
        if not who.can_write_checks:
            return _forbidden(READ_ONLY)
        invalid = _check_run_rules(body)
        if invalid:
            self.violations.append(f"POST check-runs: {invalid}")
            return _unprocessable(invalid)
        run_id = next(self._ids)
        status = "completed" if body.get("conclusion") else body.get("status", "queued")
        run = {
            "id": run_id,
            "node_id": f"CR_kwDO{run_id}",
            "head_sha": body["head_sha"],
            "external_id": body.get("external_id", ""),
            "url": f"{self.base_url}/repos/{owner}/{repo}/check-runs/{run_id}",
            "html_url": f"https://github.com/{owner}/{repo}/runs/{run_id}",
            "details_url": body.get("details_url"),
            "status": status,
            "conclusion": body.get("conclusion"),
            "started_at": body.get("started_at", _now()),
            "completed_at": _now() if status == "completed" else None,
            "output": {
                "title": None,
                "summary": None,
                "text": None,
                "annotations_count": 0,
                "annotations_url": f"{self.base_url}/repos/{owner}/{repo}/check-runs/"
                f"{run_id}/annotations",
            },
            "name": body["name"],
            "check_suite": {"id": 5_000_000 + run_id},
            "app": _app(who.app_slug),
            "pull_requests": [],
        }
        self.check_runs[run_id] = run
        self.annotations[run_id] = []
        self._apply_output(run_id, body.get("output"))
        return Answer(201, body=run)

    def _update_check_run(self, run_id: int, body: dict, who: Principal) -> Answer:
        run = self.check_runs.get(run_id)
        if run is None:
            return Answer(404, body={"message": "Not Found"})
        if not who.can_write_checks or who.app_slug != run["app"]["slug"]:
            return _forbidden(READ_ONLY)
        invalid = _check_run_rules(body)
        if invalid:
            self.violations.append(f"PATCH check-runs/{run_id}: {invalid}")
            return _unprocessable(invalid)
        for key in ("name", "details_url", "external_id", "started_at", "status", "conclusion"):
            if key in body:
                run[key] = body[key]
        if body.get("conclusion"):
            run["status"], run["completed_at"] = "completed", _now()
        self._apply_output(run_id, body.get("output"))
        return Answer(200, body=run)

    def _apply_output(self, run_id: int, output: dict | None) -> None:
        if not output:
            return
        run = self.check_runs[run_id]
        for key in ("title", "summary", "text"):
            if key in output:
                run["output"][key] = output[key]
        self.annotations[run_id] += output.get("annotations", [])  # appended, as GitHub does
        run["output"]["annotations_count"] = len(self.annotations[run_id])

    def _create_status(self, owner: str, repo: str, sha: str, body: dict, who: Principal) -> Answer:
        description = body.get("description") or ""
        if len(description) > 140:
            self.violations.append("POST statuses: description over 140 characters")
            return _unprocessable("description is too long (maximum is 140 characters)")
        status_id = next(self._ids)
        status = {
            "url": f"{self.base_url}/repos/{owner}/{repo}/statuses/{sha}",
            "avatar_url": "https://avatars.githubusercontent.com/in/15368?v=4",
            "id": status_id,
            "node_id": f"SC_kwDO{status_id}",
            "state": body["state"],
            "description": body.get("description"),
            "target_url": body.get("target_url"),
            "context": body.get("context", "default"),
            "created_at": _now(),
            "updated_at": _now(),
            "creator": _user(who.login),
            "sha": sha,
        }
        self.statuses.append(status)
        return Answer(201, body={k: v for k, v in status.items() if k != "sha"})

    def _list_pulls(self, query: dict[str, str]) -> Answer:
        """Open pull requests, filtered by `head` ("owner:branch") as GitHub does."""
        if query.get("state", "open") not in ("open", "all"):
            return Answer(200, body=[])
        head = query.get("head")
        return Answer(200, body=[p for p in self.pulls if head in (None, p["head"]["label"])])

    def _compare(self, owner: str, repo: str, basehead: str) -> Answer:
        """`base...head` as GitHub compares them: by the history of each (refs or SHAs)."""
        base_name, separator, head_name = basehead.partition("...")
        base, head = self._resolve(base_name), self._resolve(head_name)
        if not separator or base is None or head is None:
            return Answer(404, body={"message": "Not Found",
                                     "documentation_url": "https://docs.github.com/rest"})
        of_base, of_head = self._ancestors(base), self._ancestors(head)
        status = ("identical" if base == head else "behind" if head in of_base
                  else "ahead" if base in of_head else "diverged")
        ahead = sorted(of_head - of_base)
        merge_base = next((sha for sha in self._ancestors_in_order(head) if sha in of_base), base)
        url = f"{self.base_url}/repos/{owner}/{repo}/compare/{basehead}"
        html = f"https://github.com/{owner}/{repo}/compare/{basehead}"
        return Answer(200, body={
            "url": url,
            "html_url": html,
            "permalink_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "base_commit": self._commit(owner, repo, base),
            "merge_base_commit": self._commit(owner, repo, merge_base),
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": len(of_base - of_head),
            "total_commits": len(ahead),
            "commits": [self._commit(owner, repo, sha) for sha in ahead[:1]],
            "files": [],
        })

    def _resolve(self, name: str) -> str | None:
        if name in self.refs:
            return self.refs[name]
        return name.lower() if name.lower() in self.commits else None

    def _ancestors(self, sha: str) -> set[str]:
        return set(self._ancestors_in_order(sha))

    def _ancestors_in_order(self, sha: str) -> list[str]:
        """`sha` and its ancestors, nearest first."""
        order: list[str] = []
        queue = deque([sha])
        while queue:
            current = queue.popleft()
            if current not in order:
                order.append(current)
                queue.extend(self.commits.get(current, ()))
        return order

    def _commit(self, owner: str, repo: str, sha: str) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{owner}/{repo}"
        person = {"name": "Test", "email": "test@example.com", "date": "2026-01-01T00:00:00Z"}
        return {
            "url": f"{api}/commits/{sha}",
            "sha": sha,
            "node_id": f"C_kwDO{sha[:12]}",
            "html_url": f"https://github.com/{owner}/{repo}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": person,
                "committer": person,
                "message": "a commit",
                "comment_count": 0,
                "tree": {"sha": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                         "url": f"{api}/git/trees/4b825dc642cb6eb9a060e54bf8d69288fbee4904"},
            },
            "author": None,
            "committer": None,
            "parents": [{"sha": parent, "url": f"{api}/commits/{parent}"}
                        for parent in self.commits.get(sha, ())],
        }

    def _list_comments(self, owner: str, repo: str, issue: int, query: dict[str, str]) -> Answer:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        everything = self.comments.get(issue, [])
        chunk = everything[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(everything) // per_page))
        link_base = f"{self.base_url}/repos/{owner}/{repo}/issues/{issue}/comments"
        links = []
        if page < last:
            links.append(f'<{link_base}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{link_base}?per_page={per_page}&page={last}>; rel="last"')
        if page > 1:
            links.append(f'<{link_base}?per_page={per_page}&page={page - 1}>; rel="prev"')
            links.append(f'<{link_base}?per_page={per_page}&page=1>; rel="first"')
        headers = {"Link": ", ".join(links)} if links else {}
        return Answer(200, headers=headers, body=chunk)

    def _create_comment(
        self, owner: str, repo: str, issue: int, body: dict, who: Principal
    ) -> Answer:
        if len(body["body"]) > 65_536:
            self.violations.append("POST comment: body over 65536 characters")
            return _unprocessable("Body is too long (maximum is 65536 characters)")
        return Answer(201, body=self._new_comment(owner, repo, issue, who, body["body"]))

    def _new_comment(
        self, owner: str, repo: str, issue: int, who: Principal, text: str
    ) -> dict[str, Any]:
        comment_id = next(self._ids)
        comment = {
            "id": comment_id,
            "node_id": f"IC_kwDO{comment_id}",
            "url": f"{self.base_url}/repos/{owner}/{repo}/issues/comments/{comment_id}",
            "html_url": f"https://github.com/{owner}/{repo}/pull/{issue}#issuecomment-{comment_id}",
            "body": text,
            "user": _user(who.login),
            "created_at": _now(),
            "updated_at": _now(),
            "issue_url": f"{self.base_url}/repos/{owner}/{repo}/issues/{issue}",
            "author_association": "NONE" if who.app_slug else "CONTRIBUTOR",
            "performed_via_github_app": _app(who.app_slug) if who.app_slug else None,
        }
        self.comments.setdefault(issue, []).append(comment)
        return comment

    def _update_comment(self, comment_id: int, body: dict, who: Principal) -> Answer:
        for comment in itertools.chain.from_iterable(self.comments.values()):
            if comment["id"] == comment_id:
                if comment["user"]["login"] != who.login:
                    return _forbidden("Must have admin rights to Repository.")
                if len(body["body"]) > 65_536:
                    self.violations.append("PATCH comment: body over 65536 characters")
                    return _unprocessable("Body is too long (maximum is 65536 characters)")
                comment["body"], comment["updated_at"] = body["body"], _now()
                return Answer(200, body=comment)
        return Answer(404, body={"message": "Not Found"})


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            fake.handle(self)

        do_POST = do_PATCH = do_DELETE = do_PUT = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler


def _check_run_rules(body: dict) -> str | None:
    """GitHub's rules beyond the schema."""
    if body.get("status") == "completed" and not body.get("conclusion"):
        return "conclusion is required when status is completed"
    output = body.get("output")
    if output and (output.get("title") is None or output.get("summary") is None):
        return "output needs title and summary"
    return None


def _forbidden(message: str) -> Answer:
    return Answer(
        403,
        body={
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": "403",
        },
    )


def _unprocessable(message: str) -> Answer:
    return Answer(
        422,
        body={
            "message": "Validation Failed",
            "errors": [{"resource": "Request", "code": "custom", "message": message}],
            "documentation_url": "https://docs.github.com/rest",
            "status": "422",
        },
    )


def _user(login: str) -> dict[str, Any]:
    bot = login.endswith("[bot]")
    user_id = APP_USERS.get(login.removesuffix("[bot]"), 583231 if not bot else 90001)
    return {
        "login": login,
        "id": user_id,
        "node_id": f"MDQ6VXNlcj{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
        "url": f"https://api.github.com/users/{login}",
        "html_url": f"https://github.com/{login}",
        "type": "Bot" if bot else "User",
        "site_admin": False,
    }


def _app(slug: str | None) -> dict[str, Any]:
    return {
        "id": 15368,
        "slug": slug,
        "node_id": "MDM6QXBwMTUzNjg=",
        "name": "GitHub Actions" if slug == "github-actions" else slug,
        "owner": _user("github"),
        "description": "Automate your workflow from idea to production",
        "external_url": "https://help.github.com/en/actions",
        "html_url": f"https://github.com/apps/{slug}",
        "created_at": "2018-07-30T09:30:17Z",
        "updated_at": "2019-12-10T19:04:12Z",
        "permissions": {"checks": "write", "statuses": "write", "pull_requests": "write"},
        "events": [],
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
