"""A real Docker Engine for the tests: started here if none runs, plus a local registry.

Images are built from this machine's Python (see rootfs.py) and pushed to a private registry so
that they have a digest. With CI=true, a missing Docker Engine fails the tests instead of
skipping them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest
import requests

from helpers import rootfs
from helpers.paths import ROOT

IN_CI = os.environ.get("CI") == "true"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro-gate-tests"
REGISTRY_PORT = 5055  # fixed when free, so the daemon remembers which layers it pushed
STARTUP_SECONDS = 60
TEST_LABEL = "org.repro-gate.gate"


@dataclass
class PinnedImage:
    """A test image pushed to the local registry: its digest reference, ID and repo digest."""

    reference: str  # registry/repository@sha256:...
    image_id: str
    repo_digest: str
    tag: str


def unavailable(reason: str) -> None:
    """Skip outside CI; in CI a missing service is a failure."""
    if IN_CI:
        pytest.fail(f"Docker tests need {reason} (CI=true)")
    pytest.skip(reason)


def _ping(client: docker.DockerClient) -> bool:
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, requests.RequestException):
        return False


def _wait_for(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.5)
    return False


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of a running Docker Engine; dockerd is started (and stopped) here if needed."""
    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        client = None
    if client is not None and _ping(client):
        yield client
        return
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        unavailable("a running Docker Engine (or dockerd and root to start one)")
    log = tempfile.NamedTemporaryFile(prefix="dockerd-", suffix=".log", delete=False)  # noqa: SIM115
    args = ["dockerd"]
    if os.environ.get("DOCKERD_STORAGE_DRIVER"):
        args += ["--storage-driver", os.environ["DOCKERD_STORAGE_DRIVER"]]
    daemon = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        client = _connect_when_ready(daemon)
        if client is None:
            unavailable(f"dockerd to start (log: {log.name})")
        yield client
        client.close()
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()


def _connect_when_ready(daemon: subprocess.Popen[bytes]) -> docker.DockerClient | None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline and daemon.poll() is None:
        try:
            client = docker.DockerClient(base_url="unix:///var/run/docker.sock")
        except docker.errors.DockerException:
            time.sleep(0.5)
            continue
        if _ping(client):
            return client
        client.close()
    return None


@pytest.fixture(scope="session")
def registry(docker_client: docker.DockerClient) -> Iterator[str]:
    """`127.0.0.1:<port>` of a private registry (the daemon trusts loopback registries)."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        unavailable("the docker-registry binary (Debian package docker-registry)")
    port = _free_port(REGISTRY_PORT)
    storage = CACHE_DIR / "registry"
    storage.mkdir(parents=True, exist_ok=True)
    config = CACHE_DIR / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {storage}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    process = subprocess.Popen(
        [binary, "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def ready() -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    if not _wait_for(ready, 30):
        process.kill()
        unavailable("the local registry to start")
    yield f"127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=30)


def push_pinned(client: docker.DockerClient, registry: str, tag: str) -> PinnedImage:
    """Push `tag` to the registry and return its digest-pinned reference."""
    repository, _, version = tag.rpartition(":")
    remote = f"{registry}/{repository}"
    image = client.images.get(tag)
    image.tag(remote, version)
    for event in client.images.push(remote, version, stream=True, decode=True):
        if "error" in event:
            raise RuntimeError(f"push of {remote}:{version} failed: {event['error']}")
    image.reload()
    digests = [d for d in image.attrs.get("RepoDigests") or [] if d.startswith(remote + "@")]
    assert digests, f"no repo digest after pushing {remote}"
    return PinnedImage(
        reference=digests[0], image_id=image.id, repo_digest=digests[0], tag=f"{remote}:{version}"
    )


@pytest.fixture(scope="session")
def python_image(docker_client: docker.DockerClient, registry: str) -> PinnedImage:
    """Python (stdlib and pip) only, digest-pinned: for isolation tests and the action's base."""
    tag = rootfs.build_image(docker_client, "repro-gate-test/python", rootfs.PIP_PACKAGES)
    return push_pinned(docker_client, registry, tag)


@pytest.fixture(scope="session")
def torch_image(docker_client: docker.DockerClient, registry: str) -> PinnedImage:
    """Python with torch and numpy, digest-pinned: runs the embedded reference training; with
    libfaketime, as an image may have it."""
    tag = rootfs.build_image(docker_client, "repro-gate-test/torch", rootfs.TORCH_PACKAGES,
                             (rootfs.LIBFAKETIME,))
    return push_pinned(docker_client, registry, tag)


@dataclass
class GateContainers:
    """The containers of one gate name (a fresh name per test), in any state."""

    client: docker.DockerClient
    gate: str

    def list(self) -> list[docker.models.containers.Container]:
        """Containers labelled with this gate's name."""
        filters = {"label": f"{TEST_LABEL}={self.gate}"}
        return self.client.containers.list(all=True, filters=filters)


@pytest.fixture
def gate_containers(docker_client: docker.DockerClient) -> Iterator[GateContainers]:
    """A unique gate name whose containers the test can list; they are removed afterwards."""
    containers = GateContainers(docker_client, f"test-{uuid.uuid4().hex[:10]}")
    yield containers
    for leftover in containers.list():
        leftover.remove(force=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace the unprivileged training user can read, as a checkout would be."""
    path = tmp_path / "workspace"
    path.mkdir()
    path.chmod(0o755)
    return path


REPOSITORY_ROOT = ROOT
ACTION_IMAGE = "repro-gate-test/action"


BASE_LINE = re.compile(r"^FROM \S+ AS base$", re.MULTILINE)


def dockerfile_on(base: str, directory: Path) -> Path:
    """The repository's Dockerfile with its base line pointing at `base` (the public base
    cannot be pulled here), written in `directory`."""
    text = (REPOSITORY_ROOT / "Dockerfile").read_text()
    replaced, count = BASE_LINE.subn(f"FROM {base} AS base", text)
    assert count == 1, "the Dockerfile has no `FROM <image> AS base` line"
    path = directory / "Dockerfile"
    path.write_text(replaced)
    return path


@pytest.fixture(scope="session")
def action_image(docker_client: docker.DockerClient, python_image: PinnedImage,
                 tmp_path_factory: pytest.TempPathFactory) -> str:
    """The action image from the repository's Dockerfile, on a locally built Python base."""
    dockerfile = dockerfile_on(python_image.tag, tmp_path_factory.mktemp("action-dockerfile"))
    image, _ = docker_client.images.build(
        path=str(REPOSITORY_ROOT),
        dockerfile=str(dockerfile),
        tag=f"{ACTION_IMAGE}:latest",
        rm=True,
        forcerm=True,
    )
    return image.id


# -- the runner service's tests: a private dockerd with a no-op NVIDIA hook, the stand-in runner

from helpers.gpu_dockerd import DockerdError, GpuDockerd, build_standin_image  # noqa: E402


@pytest.fixture(scope="session")
def gpu_dockerd(docker_client: docker.DockerClient) -> Iterator[GpuDockerd]:
    """A private dockerd (own socket, data and exec roots) on which a GPU device request
    starts; `.visible_devices()` tells what each container asked for (gpu_dockerd.py)."""
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        unavailable("dockerd and root to start a private Docker Engine")
    driver = os.environ.get("DOCKERD_STORAGE_DRIVER") or docker_client.info()["Driver"]
    try:
        daemon = GpuDockerd(driver)
    except DockerdError as error:
        unavailable(str(error))
    try:
        daemon.start()
    except DockerdError as error:
        daemon.close()
        unavailable(str(error))
    yield daemon
    daemon.close()


@pytest.fixture(scope="session")
def standin_image(docker_client: docker.DockerClient, python_image: PinnedImage) -> str:
    """The stand-in runner (tests/fixtures/standin_runner/) on the shared daemon: its tag."""
    return build_standin_image(docker_client, python_image.tag)


@pytest.fixture(scope="session")
def standin_runner_image(docker_client: docker.DockerClient, registry: str,
                         standin_image: str, gpu_dockerd: GpuDockerd) -> str:
    """The stand-in runner, digest-pinned, in the private daemon: built on the shared one,
    pushed to the local registry, pulled by digest."""
    pinned = push_pinned(docker_client, registry, standin_image)
    gpu_dockerd.pull(pinned.reference)
    return pinned.reference
