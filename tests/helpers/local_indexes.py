"""Package sources a project can name, made real on this machine: tiny wheels written here, a
find-links folder of them, and a PEP 503 simple index served over HTTP on loopback that
records every request and can require a password (as a private index does).

The wheels are written directly (a zip with METADATA, WHEEL and RECORD), so any name and
version can be made, `2.13.0+cpu` included, without a build backend or the network.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from repro_gate.fingerprint.lockfiles import canonical_name


def make_wheel(folder: Path, name: str, version: str, module: str = "",
               requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of `name` `version` with one module, `name.replace('-', '_')`."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    files = {
        f"{stem}/__init__.py": module or f"VERSION = {version!r}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
                            f"Name: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {line}\n" for line in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = "".join(f"{path},sha256={_digest(text.encode())},{len(text.encode())}\n"
                     for path, text in files.items()) + f"{info}/RECORD,,\n"
    wheel = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in [*files.items(), (f"{info}/RECORD", record)]:
            archive.writestr(path, text)
    return wheel


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass
class SimpleIndex:
    """A PEP 503 index of the wheels in `wheels`, served while the context is open."""

    wheels: Path
    port: int = 0
    credentials: tuple[str, str] | None = None  # (user, password) required of every request
    requests: list[str] = field(default_factory=list)  # the paths asked for, in order

    def url(self, *, with_credentials: bool = True) -> str:
        user_info = ""
        if self.credentials and with_credentials:
            user_info = f"{self.credentials[0]}:{self.credentials[1]}@"
        return f"http://{user_info}127.0.0.1:{self.port}/simple/"

    def page(self, project: str) -> bytes | None:
        links = [f'<a href="/files/{wheel.name}#sha256={sha256_of(wheel)}">{wheel.name}</a>'
                 for wheel in sorted(self.wheels.glob("*.whl"))
                 if canonical_name(wheel.name.split("-")[0]) == project]
        if not links:
            return None
        return ("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>").encode()


@contextmanager
def serving(index: SimpleIndex) -> Iterator[SimpleIndex]:
    """Serve `index` on 127.0.0.1 (a free port) in a thread until the block ends."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self._answer(with_body=False)

        def do_GET(self) -> None:
            index.requests.append(self.path)
            self._answer(with_body=True)

        def _answer(self, with_body: bool) -> None:
            if index.credentials and not self._authorized():
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.end_headers()
                return
            body = self._body()
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            kind = "text/html" if self.path.startswith("/simple/") else "application/zip"
            self.send_header("Content-Type", kind)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def _authorized(self) -> bool:
            assert index.credentials is not None
            expected = base64.b64encode(":".join(index.credentials).encode()).decode()
            return self.headers.get("Authorization") == f"Basic {expected}"

        def _body(self) -> bytes | None:
            parts = [part for part in self.path.split("?")[0].split("/") if part]
            if len(parts) == 2 and parts[0] == "simple":
                return index.page(canonical_name(parts[1]))
            if len(parts) == 2 and parts[0] == "files" and (index.wheels / parts[1]).is_file():
                return (index.wheels / parts[1]).read_bytes()
            return None

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", index.port), Handler)
    index.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
