"""`runner audit`'s view of a Docker endpoint: raw HTTP on its Unix socket, and who answered.

An answer carrying the engine's `Api-Version` header came from the engine; any other refusal
(no answer at all, a 403, an answer without that header or in the proxy's words) came from the
filter in front of it.
Everything the audit creates on an endpoint is recorded here and removed by `remove_all`.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import io
import json
import socket
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

REQUEST_SECONDS = 30.0
WAIT_SECONDS = 30.0
MAX_ANSWER_BYTES = 16 * 1024 * 1024
ENGINE_HEADER = "Api-Version"
FILTER_MESSAGE = "repro-gate docker proxy"  # how the per-slot proxy's refusals begin


class Outcome(enum.Enum):
    """How one attempt ended, from the safest to the worst."""

    NOT_RUN = "not run"  # nothing to try it on (one slot only, no such device on this host)
    REFUSED_BY_FILTER = "refused by filter"  # the endpoint answered 403 or hung up
    STOPPED_BY_ENGINE = "stopped by engine"  # it passed; the engine or the kernel refused
    NO_EFFECT = "no effect"  # it passed and ran; nothing was reached
    ESCAPED = "ESCAPED"  # a canary was read, another slot, the host or another GPU reached


@dataclass(frozen=True)
class Finding:
    """An attempt's outcome and one line saying what was seen."""

    outcome: Outcome
    detail: str


class Blocked(Exception):
    """An attempt stopped before its effect could be checked: refused by the filter or engine."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


@dataclass(frozen=True)
class Answer:
    """One HTTP answer; status 0 when the endpoint closed or failed without one."""

    status: int
    from_engine: bool
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        """The error message the answer carries, on one line."""
        text = self.body[:300].decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            text = str(json.loads(self.body).get("message", text))
        return " ".join(text.split()) or f"HTTP {self.status}"

    def finding(self, step: str) -> Finding:
        """The refusal this (failed) answer stands for."""
        if self.status == 0:
            return Finding(Outcome.REFUSED_BY_FILTER, f"{step}: the endpoint closed, no answer")
        if self.status == 403 or not self.from_engine or \
                self.message().startswith(FILTER_MESSAGE):
            return Finding(Outcome.REFUSED_BY_FILTER, f"{step}: {self.status} {self.message()}")
        return Finding(Outcome.STOPPED_BY_ENGINE, f"{step}: {self.status} {self.message()}")


class UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket."""

    def __init__(self, path: Path, timeout: float = REQUEST_SECONDS) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(str(self.path))
        self.sock = sock


@dataclass
class Engine:
    """A Docker endpoint and what the audit created through it."""

    endpoint: Path
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, body: bytes | dict[str, Any] | None = None,
                timeout: float = REQUEST_SECONDS) -> Answer:
        """One request on a connection of its own; never raises for a network failure."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        headers = {"Host": "docker", "Content-Type": "application/json"} if data else {}
        connection = UnixConnection(self.endpoint, timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            payload = response.read(MAX_ANSWER_BYTES)
            return Answer(response.status, response.getheader(ENGINE_HEADER) is not None,
                          payload)
        except (OSError, http.client.HTTPException):
            return Answer(0, False, b"")
        finally:
            connection.close()

    def must(self, step: str, method: str, path: str,
             body: bytes | dict[str, Any] | None = None,
             timeout: float = REQUEST_SECONDS) -> Answer:
        """The answer when it succeeded; Blocked with who refused otherwise."""
        answer = self.request(method, path, body, timeout)
        if not answer.ok:
            raise Blocked(answer.finding(step))
        return answer

    def create(self, name: str, body: bytes | dict[str, Any]) -> str:
        """A created container's ID (removed at the end)."""
        answer = self.must("create", "POST", f"/containers/create?name={quote(name)}", body)
        container = str(json.loads(answer.body)["Id"])
        self.containers.append(container)
        return container

    def start(self, container: str) -> None:
        self.must("start", "POST", f"/containers/{container}/start")

    def wait(self, container: str) -> None:
        """Until the container exits (bounded: then it is killed)."""
        answer = self.request("POST", f"/containers/{container}/wait", timeout=WAIT_SECONDS)
        if not answer.ok:
            self.request("POST", f"/containers/{container}/kill")

    def run(self, name: str, body: dict[str, Any]) -> str:
        """Create, start and wait for a container; its ID."""
        container = self.create(name, body)
        self.start(container)
        self.wait(container)
        return container

    def archive(self, container: str, path: str) -> bytes | None:
        """The file at `path` in the container (mounts included); None when it is not there."""
        answer = self.request("GET", f"/containers/{container}/archive?path={quote(path)}")
        if answer.status == 404 and answer.from_engine:
            return None
        if not answer.ok:
            raise Blocked(answer.finding("archive"))
        return _first_file(answer.body)

    def create_volume(self, name: str, body: bytes) -> None:
        """A volume from a raw JSON body (removed at the end)."""
        self.must("volume create", "POST", "/volumes/create", body)
        self.volumes.append(name)

    def build(self, tag: str, query: str, context: bytes) -> str:
        """The build's output stream as text; Blocked when the engine reports an error."""
        self.images.append(tag)
        answer = self.must("build", "POST", f"/build?t={quote(tag)}&rm=1&forcerm=1&{query}",
                           context, timeout=WAIT_SECONDS * 2)
        text = answer.body.decode("utf-8", "replace")
        for line in text.splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                if error := json.loads(line).get("error"):
                    raise Blocked(Finding(Outcome.STOPPED_BY_ENGINE, f"build: {error}"))
        return text

    def remove_all(self) -> None:
        """Remove everything recorded, containers first (volumes in use cannot go)."""
        for container in reversed(self.containers):  # IDs, or names when made raw
            self.request("DELETE", f"/containers/{quote(container)}?force=1&v=1")
        for name in self.volumes:
            self.request("DELETE", f"/volumes/{quote(name)}?force=1")
        for tag in self.images:
            self.request("DELETE", f"/images/{quote(tag)}?force=1")
        self.containers, self.volumes, self.images = [], [], []


def _first_file(tar_bytes: bytes) -> bytes:
    """The first regular file of a tar (an archive answer), or b"" when it has none."""
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for member in tar:
            if member.isfile() and (handle := tar.extractfile(member)) is not None:
                return handle.read()
    return b""


def exchange(endpoint: Path, data: list[bytes], pause: float = 0.3,
             seconds: float = 3.0) -> bytes:
    """Raw bytes sent in parts on one connection (kept open: a daemon may cancel a request
    whose client hung up); everything that came back until it went quiet or closed."""
    received = bytearray()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(seconds)
        try:
            sock.connect(str(endpoint))
            for part in data:
                sock.sendall(part)
                time.sleep(pause)
            while chunk := sock.recv(65536):
                received += chunk
        except OSError:
            pass
    return bytes(received)
