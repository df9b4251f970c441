"""What `runner audit` plants and watches: secrets a job must never see, and a loopback URL.

On the host: a root-only folder (0700) under the canary root holding a root-only file, and a
root-only file in the host's /tmp. In another slot: a file in its work folder and a running
container created through its endpoint, labelled as the service labels a runner, with the
secret in its environment and the work folder bound, as a runner has it. Every secret is
random; an attempt that brings one back escaped. `planted` removes all of it whatever
happens. `Loopback` serves 127.0.0.1 and records which paths were asked for: a daemon that
fetches it was made to reach the host's loopback.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError
from repro_gate.runner.audit.engine import Blocked, Engine
from repro_gate.runner.containers import runner_labels

CANARY_FILE = "canary"
CANARY_SERVICE = "repro-gate-audit"
# The canary container waits on its open stdin, with the shell builtins only.
CANARY_COMMAND = ["/bin/sh", "-c", "read line"]
HIT_SECONDS = 3.0


@dataclass(frozen=True)
class OtherSlot:
    """The canaries in another slot: a file in its work folder, a running container."""

    file: Path | None
    container: str | None  # its full ID
    container_name: str | None


@dataclass(frozen=True)
class Canaries:
    """Where the secrets are; `which` names the canary a piece of data reveals."""

    secret: str
    host_folder: Path
    tmp_file: Path
    other: OtherSlot

    @property
    def host_file(self) -> Path:
        return self.host_folder / CANARY_FILE

    def which(self, data: bytes) -> str | None:
        """The canary whose secret is in `data`, or None."""
        text = data.decode("utf-8", "replace")
        for name, mark in (("host", "h"), ("host /tmp", "t"), ("other slot's file", "f"),
                           ("other slot's container", "c")):
            if f"{self.secret}-{mark}" in text:
                return name
        return None


@contextlib.contextmanager
def planted(canary_root: Path, prefix: str, image: str, other_endpoint: Path | None,
            other_work_folder: Path | None, other_gpu: str) -> Iterator[Canaries]:
    """The canaries, removed on the way out."""
    secret = secrets.token_hex(16)
    canary_root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=canary_root))  # 0700, root's
    other_engine = Engine(other_endpoint) if other_endpoint else None
    tmp_file = Path(tempfile.mkstemp(prefix=prefix, dir="/tmp")[1])  # 0600
    other_file = other_work_folder / f".{prefix}canary" if other_work_folder else None
    try:
        _write(folder / CANARY_FILE, f"{secret}-h")
        _write(tmp_file, f"{secret}-t")
        if other_file is not None:
            _write(other_file, f"{secret}-f")
        container = _canary_container(other_engine, f"{prefix}canary", image, secret,
                                      other_gpu, other_work_folder) if other_engine else None
        name = f"{prefix}canary" if container else None
        yield Canaries(secret, folder, tmp_file, OtherSlot(other_file, container, name))
    finally:
        if other_engine is not None:
            other_engine.remove_all()
        for path in (tmp_file, other_file):
            if path is not None:
                path.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


def _write(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


def _canary_container(engine: Engine, name: str, image: str, secret: str,
                      other_gpu: str, work_folder: Path | None) -> str:
    """A running container in the other slot with the secret in its environment and the
    slot's work folder bound at its own path, as a runner has it: on the engine's default
    network (where legacy links reach it), or on none where it has no such network."""
    labels = dict(runner_labels(CANARY_SERVICE, other_gpu, 1))
    body = {"Image": image, "Cmd": CANARY_COMMAND, "OpenStdin": True,
            "Env": [f"CANARY={secret}-c"], "Labels": labels}
    binds = [f"{work_folder}:{work_folder}:ro"] if work_folder else []
    try:
        return _started(engine, name, {**body, "HostConfig": {"NetworkMode": "default",
                                                               "Binds": binds}})
    except Blocked:
        engine.remove_all()
    try:
        return _started(engine, name, {**body, "HostConfig": {"NetworkMode": "none",
                                                               "Binds": binds}})
    except Blocked as blocked:
        raise GateError(f"runner audit: cannot start the canary container in the other slot "
                        f"({engine.endpoint}): {blocked.finding.detail}",
                        kind=ErrorKind.DOCKER) from None


def _started(engine: Engine, name: str, body: dict[str, object]) -> str:
    container = engine.create(name, body)
    engine.start(container)
    return container


class Loopback:
    """An HTTP server on the host's loopback that records the paths asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        seen = self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_error(404)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Loopback:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, token: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{token}"

    def hit(self, token: str, seconds: float = HIT_SECONDS) -> bool:
        """Whether `/token` was asked for, waiting up to `seconds`."""
        deadline = time.monotonic() + seconds
        while f"/{token}" not in self.paths:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True
