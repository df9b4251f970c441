"""The per-slot Docker API proxy between real clients and a real daemon (its rules on their own
are tested in tests/runner/proxy)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import pytest
from docker.utils.socket import frames_iter
from helpers.docker_fixtures import TEST_LABEL, GateContainers, PinnedImage
from helpers.gate_cli import check
from helpers.paths import TRAININGS
from helpers.proxy_thread import RunningProxy
from helpers.slot_policies import CID, OTHER_GPU, RUNNER_SOCKET, SLOT_GPU, policy_for

import repro_gate
from repro_gate.runner.proxy.ownership import SLOT_LABEL
from repro_gate.runner.slot_endpoint import FilterThread

# The daemon the `docker_client` fixture uses (docker.from_env): DOCKER_HOST or the default.
DAEMON_SOCKET = Path(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
                     .removeprefix("unix://"))





@pytest.fixture
def proxy(docker_client: docker.DockerClient, tmp_path: Path) -> Iterator[RunningProxy]:
    """A proxy for a slot whose work folder is this test's tmp_path (the workspace is in it)."""
    running = RunningProxy(policy_for(tmp_path), DAEMON_SOCKET)
    yield running
    running.stop()


def test_a_daemon_that_is_down_is_a_502_naming_its_socket(tmp_path: Path) -> None:
    running = RunningProxy(policy_for(tmp_path), upstream=tmp_path / "no-daemon.sock")
    try:
        connection = running.connection()
        connection.request("GET", "/v1.41/version")
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        running.stop()

    assert response.status == 502
    assert answer == {"message": "repro-gate docker proxy: cannot reach the Docker daemon at"
                                 f" {tmp_path}/no-daemon.sock: No such file or directory"}


def run_python(
    client: docker.DockerClient, image: str, gate: str, code: str, **options: Any
) -> Any:
    # No network unless a test asks: none needs one.
    labels = {TEST_LABEL: gate, **options.pop("labels", {})}
    return client.containers.run(image, ["python", "-c", code], detach=True,
                                 labels=labels, **{"network_mode": "none", **options})


@pytest.mark.docker
def test_a_container_runs_and_its_logs_stream_through_the_proxy(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("from the work folder\n")
    code = ("import time\nfor i in range(3):\n print('line', i, flush=True); time.sleep(0.3)\n"
            "print(open('/data/input.txt').read(), end='')")
    container = run_python(proxy.client, python_image.reference, gate_containers.gate, code,
                           volumes={str(tmp_path / "data"): {"bind": "/data", "mode": "ro"}})

    streamed = b"".join(container.logs(stream=True, follow=True)).decode()
    status = container.wait(timeout=60)
    container.remove()

    assert streamed.splitlines() == ["line 0", "line 1", "line 2", "from the work folder"]
    assert status["StatusCode"] == 0
    assert gate_containers.list() == []


@pytest.mark.docker
def test_exec_and_attach_hijack_the_connection_both_ways(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers
) -> None:
    upper = "import sys\nfor line in sys.stdin:\n print(line.upper(), end='', flush=True)"
    container = run_python(proxy.client, python_image.reference, gate_containers.gate, upper,
                           stdin_open=True)
    try:
        executed = container.exec_run(["python", "-c", "print('from exec')"])
        sock = proxy.client.api.attach_socket(
            container.id, params={"stdin": 1, "stdout": 1, "stream": 1})
        sock._sock.sendall(b"hello through the proxy\n")
        stream, payload = next(frames_iter(sock, tty=False))
        sock._sock.close()
    finally:
        container.remove(force=True)

    assert executed.exit_code == 0 and executed.output == b"from exec\n"
    assert (stream, payload) == (1, b"HELLO THROUGH THE PROXY\n")


def refusal_of(
    proxy: RunningProxy, image: str, gate: str, **options: Any
) -> docker.errors.APIError:
    with pytest.raises(docker.errors.APIError) as caught:
        run_python(proxy.client, image, gate, "print('never')", **options)
    return caught.value


@pytest.mark.docker
@pytest.mark.parametrize(("options", "reason"), [
    ({"device_requests": [docker.types.DeviceRequest(device_ids=[OTHER_GPU],
                                                      capabilities=[["gpu"]])]},
     f"DeviceRequests: DeviceIDs ['{OTHER_GPU}'] is refused; this slot may use only"
     f" ['{SLOT_GPU}']"),
    ({"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]},
     "DeviceRequests: Count -1 is refused"),
    ({"privileged": True}, "Privileged is refused"),
    ({"volumes": {"/etc": {"bind": "/host-etc", "mode": "ro"}}}, "bind '/etc' is refused"),
    ({"network_mode": "host"}, "HostConfig.NetworkMode 'host' is refused"),
])
def test_the_daemon_never_sees_a_refused_create(
    options: dict[str, Any], reason: str, proxy: RunningProxy, python_image: PinnedImage,
    gate_containers: GateContainers,
) -> None:
    error = refusal_of(proxy, python_image.reference, gate_containers.gate, **options)

    assert error.status_code == 403
    assert f"repro-gate docker proxy: {reason}" in str(error.explanation)
    assert gate_containers.list() == []


@pytest.mark.docker
def test_containers_of_other_slots_are_out_of_reach(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    docker_client: docker.DockerClient,
) -> None:
    sleep = "import time; time.sleep(120)"
    # Another slot's runner, say: created on the daemon's own socket, so without this label.
    foreign = run_python(docker_client, python_image.reference, gate_containers.gate, sleep,
                         name=f"{gate_containers.gate}-foreign")
    # This slot's runner: the service creates it on the daemon, with the slot's label.
    runner = run_python(docker_client, python_image.reference, gate_containers.gate, sleep,
                        labels={SLOT_LABEL: SLOT_GPU})
    own = run_python(proxy.client, python_image.reference, gate_containers.gate, sleep)

    def refused(action: Any) -> str:
        with pytest.raises(docker.errors.APIError) as caught:
            action()
        assert caught.value.status_code == 403
        return str(caught.value.explanation)

    inspect = refused(lambda: proxy.client.containers.get(foreign.id))
    exec_into = refused(lambda: proxy.client.api.exec_create(foreign.id, ["true"]))
    volumes_from = refused(lambda: run_python(
        proxy.client, python_image.reference, gate_containers.gate, "0", volumes_from=[foreign.id]))
    links = refused(lambda: run_python(
        proxy.client, python_image.reference, gate_containers.gate, "0",
        network_mode="bridge", links={foreign.id: "peer"}))
    by_name = refused(lambda: proxy.client.containers.get(foreign.name))
    by_prefix = refused(lambda: proxy.client.api.inspect_container(own.id[:12]))
    take_an_id = refused(lambda: run_python(
        proxy.client, python_image.reference, gate_containers.gate, "0", name=foreign.id[:12]))
    listed = {c.id: c.labels.get(SLOT_LABEL) for c in proxy.client.containers.list(all=True)}
    mine = proxy.client.containers.get(own.id)
    runners = proxy.client.containers.get(runner.id)
    executed = runners.exec_run(["python", "-c", "print('in the runner')"])
    for container in (own, foreign, runner):
        container.remove(force=True)

    assert f"container '{foreign.id}' is not one of this slot's" in inspect
    assert "is not one of this slot's" in exec_into
    assert "HostConfig.VolumesFrom is refused" in volumes_from
    assert "HostConfig.Links is refused: it would copy another container's environment" in links
    assert f"full 64-hex ID here, not '{foreign.name}'" in by_name
    assert f"full 64-hex ID here, not '{own.id[:12]}'" in by_prefix
    assert "reads as a container ID" in take_an_id
    # Only the slot's containers (an interrupted earlier run may have left one of its own).
    assert own.id in listed and foreign.id not in listed and set(listed.values()) == {SLOT_GPU}
    assert runners.id == runner.id and executed.output == b"in the runner\n"
    assert mine.labels[SLOT_LABEL] == SLOT_GPU


@pytest.mark.docker
def test_the_slots_own_gpu_reaches_the_daemon(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers
) -> None:
    own = docker.types.DeviceRequest(device_ids=[SLOT_GPU], capabilities=[["gpu"]])

    error = refusal_of(proxy, python_image.reference, gate_containers.gate,
                       device_requests=[own])

    # The daemon's own answer (this host has no NVIDIA runtime), not the proxy's 403.
    assert error.status_code != 403
    assert "could not select device driver" in str(error.explanation)
    assert "repro-gate docker proxy" not in str(error.explanation)
    (created,) = gate_containers.list()
    assert created.attrs["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == [SLOT_GPU]


# Run inside a container action: ask the Docker socket at each path for another slot's GPU.
ASK_FOR_ANOTHER_GPU = f"""
import http.client, json, socket
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.host)
body = {{"Image": "x", "HostConfig": {{"DeviceRequests": [
    {{"Count": 0, "DeviceIDs": ["{OTHER_GPU}"], "Capabilities": [["gpu"]]}}]}}}}
for path in ("{RUNNER_SOCKET}", "/opt/slot.sock"):
    connection = Unix(path)
    connection.request("POST", "/v1.41/containers/create", json.dumps(body),
                       {{"Content-Type": "application/json"}})
    answer = connection.getresponse()
    print(json.dumps([path, answer.status, json.loads(answer.read())["message"]]))
"""


@pytest.mark.docker
def test_a_container_action_gets_the_slots_proxy_socket_one_level_down(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers
) -> None:
    # As the runner starts a container action: its own socket path, in both forms.
    action = run_python(
        proxy.client, python_image.reference, gate_containers.gate, ASK_FOR_ANOTHER_GPU,
        volumes={RUNNER_SOCKET: {"bind": RUNNER_SOCKET, "mode": "rw"}},
        mounts=[docker.types.Mount("/opt/slot.sock", "/run/docker.sock", type="bind",
                                   read_only=True)])
    status = action.wait(timeout=60)
    output = action.logs().decode()
    answers = [json.loads(line) for line in output.splitlines() if line.startswith("[")]
    action.reload()
    mounts = {mount["Destination"]: (mount["Source"], mount["RW"])
              for mount in action.attrs["Mounts"]}
    action.remove()

    assert mounts == {RUNNER_SOCKET: (str(proxy.socket), True),
                      "/opt/slot.sock": (str(proxy.socket), False)}
    refusal = (f"repro-gate docker proxy: DeviceRequests: DeviceIDs ['{OTHER_GPU}'] is refused;"
               f" this slot may use only ['{SLOT_GPU}']")
    assert answers == [[RUNNER_SOCKET, 403, refusal], ["/opt/slot.sock", 403, refusal]], output
    assert status["StatusCode"] == 0
    assert gate_containers.list() == []


@pytest.mark.docker
def test_bad_bodies_are_refused_and_the_connection_carries_on(proxy: RunningProxy) -> None:
    connection = proxy.connection()

    def exchange(method: str, path: str, body: Any = None, **headers: str) -> tuple[int, dict]:
        connection.request(method, path, body=body, headers=headers,
                           encode_chunked=not isinstance(body, bytes | None))
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")

    malformed = exchange("POST", "/v1.41/containers/create", b"{not json",
                         **{"Content-Type": "application/json"})
    chunked = exchange("POST", "/v1.41/containers/create",
                       iter([b'{"Image": "x", "HostConfig": ', b'{"Privileged": true}}']),
                       **{"Content-Type": "application/json"})
    lowercase = exchange("POST", "/v1.41/containers/create",
                         b'{"Image": "x", "hostconfig": {"privileged": true}}')
    top_level = exchange("POST", "/v1.41/containers/create", b'{"Image": "x", "Privileged": true}')
    version = exchange("GET", "/v1.41/version")
    swarm = exchange("POST", "/v1.41/swarm/init", b'{"ListenAddr": "0.0.0.0"}')
    connection.close()

    assert malformed[0] == 400 and "malformed JSON body" in malformed[1]["message"]
    assert chunked == (403, {"message": "repro-gate docker proxy: Privileged is refused:"
                                        " a privileged container sees every device of the host"})
    assert lowercase == (403, {"message": "repro-gate docker proxy: key 'hostconfig' is refused:"
                                          " the API spells it 'HostConfig'"})
    assert top_level == (403, {"message": "repro-gate docker proxy: unknown key 'Privileged'"
                                          " is refused"})
    assert swarm[0] == 403 and "swarm mode is refused" in swarm[1]["message"]
    assert version[0] == 200 and version[1]["ApiVersion"]


@pytest.mark.docker
def test_a_body_over_the_limit_is_refused_before_it_is_read(proxy: RunningProxy) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(proxy.socket))
        sock.sendall(b"POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 5242880\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk

    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"request body over 4 MiB" in answer


@pytest.mark.docker
def test_cancelling_serve_closes_open_streams_and_removes_the_socket(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    running = RunningProxy(policy_for(tmp_path), DAEMON_SOCKET)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(running.socket))
        sock.sendall(b"GET /v1.41/events HTTP/1.1\r\nHost: docker\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")  # an endless stream is open

        running.stop()
        rest = sock.recv(65536)

    assert not running.thread.is_alive() and running.ended.is_set()
    assert rest == b""
    assert not running.socket.exists()


@pytest.mark.docker
@pytest.mark.slow
def test_the_gate_runs_a_tiny_training_through_the_proxy(
    proxy: RunningProxy, torch_image: PinnedImage, gate_containers: GateContainers,
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As in a runner container: the gate is installed inside the work folder, so the probe
    # it mounts into the training is too, and DOCKER_HOST names the slot's proxy.
    installed = tmp_path / "gate-install"
    shutil.copytree(Path(repro_gate.__file__).parent, installed / "repro_gate",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TRAININGS / "tiny.py", workspace / "tiny.py")
    shutil.copy(TRAININGS / "deterministic.py", workspace / "train.py")
    monkeypatch.setenv("PYTHONPATH", str(installed))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.socket}")

    result = check(workspace, "--name", gate_containers.gate, "--image", torch_image.reference,
                   "--gpus", "none", "--no-cost", "--no-noise-floor", "--timeout", "180",
                   "--", "python", "train.py")

    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "pass"
    assert [(run["name"], run["launcher"]) for run in manifest["runs"]] == [
        ("A", "docker"), ("B", "docker")]
    assert manifest["comparison"]["trajectory"]["status"] == "equal"
    assert gate_containers.list() == []


@pytest.mark.docker
def test_the_gate_names_the_proxys_refusal_in_one_line(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Run from its own checkout, the gate mounts its probe from outside the slot's work folder.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.socket}")

    result = check(workspace, "--name", gate_containers.gate, "--image", python_image.reference,
                   "--gpus", "none", "--no-cost", "--no-noise-floor", "--timeout", "60",
                   "--", "python", "-V")

    assert result.exit_code == 2
    message = result.manifest["reasons"][0]["message"]
    assert message.startswith("cannot create the container for run A: repro-gate docker proxy:")
    assert "is refused: only paths inside the slot's work folder" in message
    assert "\n" not in message


def exchange_raw(proxy: RunningProxy, data: bytes) -> bytes:
    """Send raw bytes to the proxy; everything it answers until it closes the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(proxy.socket))
        sock.settimeout(30)
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def create_head(name: str, body: bytes, extra: bytes = b"") -> bytes:
    """A container create request carrying `name`: if it reached the daemon, it would exist."""
    return (b"POST /v1.41/containers/create?name=" + name.encode() + b" HTTP/1.1\r\n"
            b"Host: docker\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


# (raw request, the refusal): each once smuggled a second request past the proxy, or would.
FRAMING = [
    (b"GET /v1.41/version HTTP/1.1\r\nHost: docker\nX-A: b\r\n\r\n",
     "a bare LF or CR in the request head is refused"),
    (b"GET /v1.41/version HTTP/1.1\r\nHost: docker\r\nX-A: b\r\n c\r\n\r\n",
     "obsolete line folding is refused"),
    (b"POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\nContent-Length: 2\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "both Content-Length and Transfer-Encoding"),
    (b"POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\n"
     b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding 'gzip, chunked'"),
    (b"POST /v1.41/containers/create HTTP/1.1\r\nHost: docker\r\nContent-Length: 2\r\n"
     b"Content-Length: 2\r\n\r\n{}", "a repeated Content-Length"),
    (b"GET /v1.41/version HTTP/1.1\r\nHost: docker\r\nX A: b\r\n\r\n", "malformed header line"),
    (b"GET /v1.41/version HTTP/1.1\r\nHost: d\xc3\xb6cker\r\n\r\n", "non-ASCII bytes"),
    (b"GET /v1.41/version HTTP/1.0\r\nHost: docker\r\n\r\n", "HTTP/1.1 only"),
    (b"GET http://docker/v1.41/version HTTP/1.1\r\nHost: docker\r\n\r\n",
     "malformed request target"),
    (b"GET //docker/v1.41/version HTTP/1.1\r\nHost: docker\r\n\r\n",
     "malformed request target"),
]


@pytest.mark.docker
@pytest.mark.parametrize(("request_bytes", "reason"), FRAMING)
def test_ambiguous_framing_is_refused_and_the_connection_closed(
    request_bytes: bytes, reason: str, proxy: RunningProxy, gate_containers: GateContainers,
    python_image: PinnedImage,
) -> None:
    smuggled = create_head(f"{gate_containers.gate}-smuggled", json.dumps(
        {"Image": python_image.reference, "Labels": {TEST_LABEL: gate_containers.gate}}).encode())

    answer = exchange_raw(proxy, request_bytes + smuggled)

    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert answer.count(b"\r\n\r\n") == 1  # one refusal, then the proxy hung up
    assert reason in json.loads(answer.split(b"\r\n\r\n", 1)[1])["message"]
    assert gate_containers.list() == []


@pytest.mark.docker
def test_expect_and_pipelined_requests_are_refused(
    proxy: RunningProxy, gate_containers: GateContainers, python_image: PinnedImage,
) -> None:
    body = json.dumps({"Image": python_image.reference,
                       "Labels": {TEST_LABEL: gate_containers.gate}}).encode()
    # The interim answer of `Expect` was once taken as final, then a HEAD's bytes relayed raw.
    expect = exchange_raw(proxy, create_head(f"{gate_containers.gate}-expect", body,
                                             b"Expect: 100-continue\r\n")
                          + b"HEAD /v1.41/_ping HTTP/1.1\r\nHost: docker\r\n\r\n")
    pipelined = exchange_raw(proxy, b"GET /v1.41/_ping HTTP/1.1\r\nHost: docker\r\n\r\n"
                             + create_head(f"{gate_containers.gate}-second", body))
    too_long = exchange_raw(proxy, b"GET /v1.41/_ping HTTP/1.1\r\nX-A: "
                            + b"a" * (70 * 1024) + b"\r\n\r\n")

    assert expect.startswith(b"HTTP/1.1 400 ") and b"Expect is refused" in expect
    assert expect.count(b"\r\n\r\n") == 1
    assert pipelined.startswith(b"HTTP/1.1 400 ") and b"pipelined requests are refused" in pipelined
    assert too_long.startswith(b"HTTP/1.1 431 ")
    assert gate_containers.list() == []


@pytest.mark.docker
def test_a_client_that_closes_its_side_still_gets_the_answer(proxy: RunningProxy) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(proxy.socket))
        sock.settimeout(30)
        sock.sendall(b"GET /v1.41/version HTTP/1.1\r\nHost: docker\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk

    assert answer.startswith(b"HTTP/1.1 200 ") and b'"ApiVersion"' in answer


@pytest.mark.docker
def test_keep_alive_requests_one_after_another_pass(proxy: RunningProxy) -> None:
    connection = proxy.connection()
    answers = []
    for _ in range(3):
        connection.request("GET", "/v1.41/_ping")
        response = connection.getresponse()
        answers.append((response.status, response.read()))
    connection.close()

    assert answers == [(200, b"OK")] * 3


def post_json(proxy: RunningProxy, path: str, body: bytes) -> tuple[int, str]:
    connection = proxy.connection()
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, str(answer.get("message", ""))


# (endpoint, body, the refusal): bodies that once reached the daemon as they were sent.
BODIES = [
    ("/v1.41/volumes/create", {"Name": "{gate}-root", "DriverOpts": {
        "type": "tmpfs", "o": "bind", "device": "/"}}, "DriverOpts is refused"),
    ("/v1.41/volumes/create", {"Name": "{gate}-rbind", "DriverOpts": {
        "type": "tmpfs", "o": "rbind", "device": "/etc"}}, "DriverOpts is refused"),
    ("/v1.41/volumes/create", {"Name": "{gate}-case", "driveropts": {"device": "/"}},
     "key 'driveropts' is refused: the API spells it 'DriverOpts'"),
    ("/v1.41/volumes/create", {"Name": "{gate}-unknown", "Options": {"device": "/"}},
     "unknown key 'Options' is refused"),
    ("/v1.41/containers/create?name={gate}-secopt", {"Image": "{image}", "HostConfig": {
        "SecurityOpt": ["disable"]}}, "SecurityOpt 'disable' is refused"),
    ("/v1.41/containers/create?name={gate}-secopt2", {"Image": "{image}", "HostConfig": {
        "SecurityOpt": ["apparmor=unconfined"]}}, "'apparmor=unconfined' is refused"),
    ("/v1.41/containers/create?name={gate}-cgroup", {"Image": "{image}", "HostConfig": {
        "CgroupParent": "/"}}, "HostConfig.CgroupParent is refused"),
    ("/v1.41/containers/create?name={gate}-mount", {"Image": "{image}", "HostConfig": {
        "Mounts": [{"Type": "volume", "Source": "{gate}-m", "Target": "/m", "VolumeOptions": {
            "DriverConfig": {"Options": {"type": "tmpfs", "o": "bind", "device": "/"}}}}]}},
     "HostConfig.Mounts.VolumeOptions.DriverConfig.Options is refused"),
    # Go matches keys by Unicode case folding: the long s is an s to the daemon.
    ("/v1.41/containers/create?name={gate}-fold", {"Image": "{image}", "HostConfig": {
        "DeviceReque\u017fts": [{"Count": -1, "Capabilities": [["gpu"]]}]}},
     "key 'HostConfig.DeviceReque\u017fts' is refused: the API spells it 'DeviceRequests'"),
    ("/v1.41/containers/{CID}/exec", {"Cmd": ["true"], "privileged": True},
     "key 'privileged' is refused"),
    ("/v1.41/containers/create?name={gate}-link", {"Image": "{image}", "NetworkingConfig": {
        "EndpointsConfig": {"bridge": {"Links": ["other:peer"]}}}}, "Links is refused"),
]


@pytest.mark.docker
@pytest.mark.parametrize(("path", "body", "reason"), BODIES)
def test_bodies_are_rebuilt_from_an_allow_list(
    path: str, body: dict[str, Any], reason: str, proxy: RunningProxy,
    gate_containers: GateContainers, python_image: PinnedImage,
    docker_client: docker.DockerClient,
) -> None:
    text = (json.dumps(body).replace("{gate}", gate_containers.gate)
            .replace("{image}", python_image.reference))
    path = path.replace("{gate}", gate_containers.gate).replace("{CID}", CID)

    status, message = post_json(proxy, path, text.encode())

    assert (status, reason in message) == (403, True), message
    names = {volume.name for volume in docker_client.volumes.list()}
    assert not any(name.startswith(gate_containers.gate) for name in names)
    assert docker_client.containers.list(all=True, filters={"name": gate_containers.gate}) == []


@pytest.mark.docker
def test_a_repeated_key_is_refused_not_merged(
    proxy: RunningProxy, gate_containers: GateContainers, docker_client: docker.DockerClient,
) -> None:
    # Python keeps the last `device`, the daemon merged both: now neither passes.
    body = (b'{"Name": "' + gate_containers.gate.encode() + b'", "DriverOpts": {}, '
            b'"DriverOpts": {"type": "tmpfs", "device": "/"}}')

    status, message = post_json(proxy, "/v1.41/volumes/create", body)

    assert (status, message) == (403, "repro-gate docker proxy: repeated key 'DriverOpts' is"
                                      " refused")
    assert gate_containers.gate not in {volume.name for volume in docker_client.volumes.list()}


@pytest.mark.docker
def test_what_would_leak_other_slots_is_refused_or_narrowed(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    docker_client: docker.DockerClient,
) -> None:
    network = docker_client.networks.create(gate_containers.gate)
    sleep = "import time; time.sleep(120)"
    foreign = run_python(docker_client, python_image.reference, gate_containers.gate, sleep,
                         network_mode=network.name)
    own = run_python(proxy.client, python_image.reference, gate_containers.gate, sleep,
                     network_mode=network.name)
    try:
        inspected = proxy.client.api.inspect_network(network.id)
        # Before API 1.28 a network listing holds each network's containers too.
        listed = post_to(proxy.socket, f"/v1.27/networks?filters=%7B%22id%22%3A%5B%22{network.id}"
                         "%22%5D%7D", None)
        with pytest.raises(docker.errors.APIError) as df:
            proxy.client.df()
        with pytest.raises(docker.errors.APIError) as from_src:
            proxy.client.api.import_image_from_url("http://127.0.0.1:9/x.tar", "x")
        with pytest.raises(docker.errors.APIError) as build:
            proxy.client.api._result(proxy.client.api._post(
                proxy.client.api._url("/build"), params={"cgroupparent": "/",
                                                         "remote": "http://127.0.0.1:9/"}))
    finally:
        for container in (own, foreign):
            container.remove(force=True)
        network.remove()

    assert set(inspected["Containers"]) == {own.id}
    assert listed[0] == 200 and [set(n["Containers"]) for n in json.loads(listed[1])] == [
        {own.id}]
    assert df.value.status_code == 403 and "system/df is refused" in str(df.value.explanation)
    assert from_src.value.status_code == 403
    assert "of /images/create is refused (allowed: fromImage, tag, platform)" in str(
        from_src.value.explanation)
    assert build.value.status_code == 403 and "builds are refused" in str(build.value.explanation)


@pytest.mark.docker
def test_images_load_and_archives_stream_through_the_proxy(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    docker_client: docker.DockerClient, tmp_path: Path,
) -> None:
    tag = f"repro-gate-test/loaded:{gate_containers.gate}"
    docker_client.images.get(python_image.reference).tag(tag)
    saved = b"".join(docker_client.images.get(tag).save(named=tag))
    docker_client.images.remove(tag)
    archive = tmp_path / "in.tar"
    with tarfile.open(archive, "w") as tar:
        (tmp_path / "hello.txt").write_text("put through the proxy\n")
        tar.add(tmp_path / "hello.txt", arcname="hello.txt")
    try:
        (loaded,) = proxy.client.images.load(saved)
        container = proxy.client.containers.create(
            tag, ["python", "-c", "print(open('/tmp/hello.txt').read(), end='')"],
            labels={TEST_LABEL: gate_containers.gate}, network_mode="none")
        put = container.put_archive("/tmp", archive.read_bytes())
        container.start()
        container.wait(timeout=60)
        output = container.logs()
        container.remove()
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.images.remove(tag)

    assert tag in loaded.tags
    assert put is True
    assert output == b"put through the proxy\n"


@pytest.mark.docker
def test_one_slots_large_bodies_do_not_delay_another_slots_ping(
    docker_client: docker.DockerClient, tmp_path: Path,
) -> None:
    sockets = tmp_path / "s"
    sockets.mkdir()
    filters = [FilterThread(policy_for(tmp_path / name), sockets / f"{name}.sock", DAEMON_SOCKET,
                            index) for index, name in enumerate("ab")]
    for each in filters:
        each.start()
    big = json.dumps({"Image": "x", "Env": [f"V{i}=" + "x" * 30 for i in range(100_000)],
                      "HostConfig": {"Privileged": True}}).encode()
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            post_to(sockets / "a.sock", "/v1.41/containers/create", big)

    # Each body is a few tenths of a second of parsing: in one shared event loop, slot B's
    # ping waited behind slot A's queue of them (p90 0.5 s here, against 0.08 s now).
    floods = [threading.Thread(target=flood) for _ in range(8)]
    for thread in floods:
        thread.start()
    latencies = []
    try:
        time.sleep(0.5)
        for _ in range(40):
            started = time.monotonic()
            status, _ = post_to(sockets / "b.sock", "/v1.41/_ping", None)
            latencies.append(time.monotonic() - started)
            assert status == 200
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in floods:
            thread.join()
        for each in filters:
            each.stop()

    assert sorted(latencies)[len(latencies) * 9 // 10] < 0.3, sorted(latencies)[-5:]


def post_to(path: Path, target: str, body: bytes | None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("localhost", timeout=60)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    connection.sock = sock
    connection.request("GET" if body is None else "POST", target, body=body,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, answer


@pytest.mark.docker
def test_a_job_cannot_take_the_name_of_the_slots_next_runner(
    python_image: PinnedImage, gate_containers: GateContainers,
    docker_client: docker.DockerClient, tmp_path: Path,
) -> None:
    stem = f"{gate_containers.gate}-slot"  # as the service's runner_name_stem
    running = RunningProxy(policy_for(tmp_path, reserved_names=(stem,)), DAEMON_SOCKET)
    try:
        with pytest.raises(docker.errors.APIError) as squat:
            run_python(running.client, python_image.reference, gate_containers.gate, "0",
                       name=f"{stem}1")
        own = run_python(running.client, python_image.reference, gate_containers.gate, "0",
                         name=f"{gate_containers.gate}-mine")
        with pytest.raises(docker.errors.APIError) as rename:
            own.rename(f"{stem}0")
        own.remove(force=True)
    finally:
        running.stop()

    for refused in (squat.value, rename.value):
        assert refused.status_code == 403
        assert f"names {stem}… are the runner's" in str(refused.explanation)
    assert docker_client.containers.list(all=True, filters={"name": stem}) == []


@pytest.mark.docker
@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI")
def test_the_docker_cli_runs_creates_and_execs_through_the_proxy(
    proxy: RunningProxy, python_image: PinnedImage, gate_containers: GateContainers,
    tmp_path: Path,
) -> None:
    # The Actions runner drives container actions with the docker CLI, whose bodies carry
    # every field of the API's structs: all of them must be in the allow-lists.
    environment = {**os.environ, "DOCKER_HOST": f"unix://{proxy.socket}"}
    label = f"{TEST_LABEL}={gate_containers.gate}"

    def docker_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", *args], env=environment, capture_output=True,
                              text=True, input=stdin, timeout=120, check=False)

    ran = docker_cli("run", "--rm", "-i", "--label", label, "--network", "none", "-v",
                     f"{tmp_path}:/w", python_image.reference, "python", "-c",
                     "import sys; print(sys.stdin.read().upper(), end='')", stdin="piped\n")
    created = docker_cli("create", "--label", label, "--network", "none",
                         python_image.reference, "python", "-c", "import time; time.sleep(60)")
    container = created.stdout.strip()
    started = docker_cli("start", container)
    executed = docker_cli("exec", "-i", container, "python", "-c",
                          "import sys; print('exec', sys.stdin.read(), end='')", stdin="in\n")
    by_name = docker_cli("inspect", created.stdout.strip()[:12])
    gpus = docker_cli("run", "--rm", "--label", label, "--gpus", "all",
                      python_image.reference, "true")
    removed = docker_cli("rm", "-f", container)

    assert (ran.returncode, ran.stdout) == (0, "PIPED\n"), ran.stderr
    assert created.returncode == started.returncode == removed.returncode == 0, created.stderr
    assert (executed.returncode, executed.stdout) == (0, "exec in\n"), executed.stderr
    assert by_name.returncode != 0 and "full 64-hex ID" in by_name.stderr
    assert gpus.returncode != 0 and "DeviceRequests: Count -1 is refused" in gpus.stderr
    assert gate_containers.list() == []
