"""The proxy server end to end in this process: real HTTP on its Unix socket, and in place of the
Docker daemon a small socket server that records each request the proxy wrote and answers as
the Engine API does. What reaches it is what the proxy rebuilt, never what the client sent."""

from __future__ import annotations

import json
import shutil
import socketserver
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.proxy_thread import RunningProxy

from repro_gate.runner.proxy.ownership import SLOT_LABEL
from repro_gate.runner.proxy.policy import SlotPolicy

SLOT_GPU = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_GPU = "GPU-99999999-8888-7777-6666-555555555555"
CREATED = "0123456789abcdef" * 4  # the ID the stand-in daemon gives a created container
FOREIGN = "fedcba9876543210" * 4  # another slot's container
MISSING = "ab" * 32


@dataclass
class Daemon:
    """A stand-in Docker daemon: one request per connection, each recorded as received."""

    socket: Path
    received: list[tuple[str, bytes]] = field(default_factory=list)

    def answer(self, start: str) -> tuple[int, dict[str, object]]:
        method, target, _ = start.split(" ")
        if (method, target.split("?")[0]) == ("POST", "/v1.41/containers/create"):
            return 201, {"Id": CREATED, "Warnings": []}
        if target == f"/containers/{FOREIGN}/json":
            return 200, {"Id": FOREIGN, "Config": {"Labels": {SLOT_LABEL: OTHER_GPU}}}
        if target == f"/containers/{MISSING}/json":
            return 404, {"message": f"No such container: {MISSING}"}
        return 200, {"Id": CREATED, "Config": {"Labels": {}}}


def serve_daemon(daemon: Daemon) -> socketserver.ThreadingUnixStreamServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            lines = []
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                lines.append(line.decode("latin-1").rstrip("\r\n"))
            length = next((int(value) for name, _, value in
                           (line.partition(": ") for line in lines[1:])
                           if name.lower() == "content-length"), 0)
            daemon.received.append(("\r\n".join(lines), self.rfile.read(length)))
            status, body = daemon.answer(lines[0])
            payload = json.dumps(body).encode()
            self.wfile.write(f"HTTP/1.1 {status} X\r\nApi-Version: 1.41\r\nContent-Type:"
                             f" application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                             .encode() + payload)

    server = socketserver.ThreadingUnixStreamServer(str(daemon.socket), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    folder = Path(tempfile.mkdtemp(prefix="rg-daemon-"))  # short: a socket path
    stand_in = Daemon(folder / "docker.sock")
    server = serve_daemon(stand_in)
    yield stand_in
    server.shutdown()
    server.server_close()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def proxy(daemon: Daemon, tmp_path: Path) -> Iterator[RunningProxy]:
    running = RunningProxy(SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=tmp_path), daemon.socket)
    yield running
    running.stop()


def exchange(proxy: RunningProxy, *requests: tuple[str, str, bytes | None]
             ) -> list[tuple[int, dict[str, object]]]:
    """The requests in turn on one keep-alive connection; each answer's status and JSON."""
    connection = proxy.connection()
    answers = []
    for method, target, body in requests:
        connection.request(method, target, body=body, headers={
            "Content-Type": "application/json", "X-Client-Header": "never forwarded"})
        response = connection.getresponse()
        answers.append((response.status, json.loads(response.read() or b"{}")))
    connection.close()
    return answers


def test_a_create_reaches_the_daemon_as_the_proxy_rebuilt_it(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    body = {"Image": "python", "HostConfig": {"Binds": ["/var/run/docker.sock:/s"]},
            "Labels": {"team": "ml"}}

    [(status, created)] = exchange(
        proxy, ("POST", "/v1.41/containers/create?name=job", json.dumps(body).encode()))

    [(head, forwarded)] = daemon.received
    assert (status, created) == (201, {"Id": CREATED, "Warnings": []})
    assert head.splitlines()[:2] == ["POST /v1.41/containers/create?name=job HTTP/1.1",
                                     "Host: docker"]
    assert "X-Client-Header" not in head
    assert json.loads(forwarded) == {
        "Image": "python", "HostConfig": {"Binds": [f"{proxy.socket}:/s"]},
        "Labels": {"team": "ml", SLOT_LABEL: SLOT_GPU}}


def test_volumes_and_networks_a_job_creates_carry_the_slots_label(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    answers = exchange(
        proxy, ("POST", "/v1.41/volumes/create", b'{"Name": "cache", "Labels": {"a": "b"}}'),
        ("POST", "/v1.41/networks/create", b'{"Name": "net"}'),
        ("POST", "/v1.41/volumes/create", b""))

    assert [status for status, _ in answers] == [200, 200, 200]
    assert [json.loads(body) for _, body in daemon.received] == [
        {"Name": "cache", "Labels": {"a": "b", SLOT_LABEL: SLOT_GPU}},
        {"Name": "net", "Labels": {SLOT_LABEL: SLOT_GPU}},
        {"Labels": {SLOT_LABEL: SLOT_GPU}}]


def test_a_named_volume_a_create_would_make_is_made_first_with_the_slots_label(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    body = {"Image": "python", "HostConfig": {
        "Binds": ["cache:/cache"], "Mounts": [{"Type": "volume", "Source": "models",
                                               "Target": "/m"}]}}

    [(status, _)] = exchange(proxy, ("POST", "/v1.41/containers/create",
                                     json.dumps(body).encode()))

    assert status == 201
    assert [(head.splitlines()[0], json.loads(sent)) for head, sent in daemon.received] == [
        ("POST /volumes/create HTTP/1.1", {"Name": "cache", "Labels": {SLOT_LABEL: SLOT_GPU}}),
        ("POST /volumes/create HTTP/1.1", {"Name": "models", "Labels": {SLOT_LABEL: SLOT_GPU}}),
        ("POST /v1.41/containers/create HTTP/1.1", {**body, "Labels": {SLOT_LABEL: SLOT_GPU}})]


def test_a_container_the_slot_created_is_addressed_without_asking_the_daemon_whose_it_is(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    answers = exchange(proxy, ("POST", "/v1.41/containers/create", b'{"Image": "python"}'),
                       ("POST", f"/v1.41/containers/{CREATED}/start", None))

    assert [status for status, _ in answers] == [201, 200]
    assert [head.splitlines()[0] for head, _ in daemon.received] == [
        "POST /v1.41/containers/create HTTP/1.1",
        f"POST /v1.41/containers/{CREATED}/start HTTP/1.1"]


def test_a_refused_request_never_reaches_the_daemon_and_the_connection_carries_on(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    answers = exchange(
        proxy, ("POST", "/v1.41/swarm/init", b'{"ListenAddr": "0.0.0.0"}'),
        ("POST", "/v1.41/containers/create", b'{"Image": "x", "HostConfig": {"Privileged": 1}}'),
        ("GET", "/v1.41/_ping", None))

    assert answers[0][0] == 403 and "swarm mode is refused" in str(answers[0][1]["message"])
    assert answers[1][0] == 403 and "Privileged is refused" in str(answers[1][1]["message"])
    assert answers[2][0] == 200
    assert [head.splitlines()[0] for head, _ in daemon.received] == [
        "GET /v1.41/_ping HTTP/1.1"]


def test_another_slots_container_is_refused_once_the_daemon_names_its_owner(
    proxy: RunningProxy, daemon: Daemon
) -> None:
    answers = exchange(proxy, ("GET", f"/v1.41/containers/{FOREIGN}/json", None),
                       ("POST", f"/v1.41/containers/{MISSING}/exec", b'{"Cmd": ["true"]}'))

    assert answers == [
        (403, {"message": f"repro-gate docker proxy: container '{FOREIGN}' is not one of this"
                          " slot's"}),
        (404, {"message": f"repro-gate docker proxy: no such container: {MISSING}"})]
    # Only the proxy's own inspects reached the daemon.
    assert [head.splitlines()[0] for head, _ in daemon.received] == [
        f"GET /containers/{FOREIGN}/json HTTP/1.1", f"GET /containers/{MISSING}/json HTTP/1.1"]


def test_the_socket_is_open_to_the_runners_user_and_removed_when_the_proxy_stops(
    daemon: Daemon, tmp_path: Path
) -> None:
    running = RunningProxy(SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=tmp_path), daemon.socket)
    mode = stat.S_IMODE(running.socket.stat().st_mode)
    socket = running.socket

    running.stop()

    assert mode == 0o666
    assert running.ended.is_set() and not socket.exists()
