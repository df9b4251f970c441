"""Environments built inside the training image (Docker mode), cached in volumes, on a real
Docker Engine: built once and then reused without a container, seen by a training container
started by the Docker launcher, and pins that do not resolve remembered in their volume."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from helpers.docker_fixtures import GateContainers, PinnedImage
from helpers.upgrade_index import PackageIndex, build_wheel

from repro_gate.config import Config, ContainerConfig
from repro_gate.config.model import UpgradeConfig
from repro_gate.environments import DockerEnvironments, Environment
from repro_gate.environments.docker_volumes import ENV_ROOT, VOLUME_KEY_LENGTH, VOLUME_PREFIX
from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import PythonEnvironment, RunSpec
from repro_gate.launch.docker import LABEL_GATE, DockerLauncher
from repro_gate.launch.host_paths import PathTranslator

pytestmark = pytest.mark.docker

# The wheels the tests pin: numlib 1.1 changes SCALE; harmless 1.1 needs leaf>=1.1.
WHEELS = (("numlib", "1.1"), ("harmless", "1.1"), ("leaf", "1.0"))
IMAGE_LABEL = "org.repro-gate.image"


@pytest.fixture(scope="module")
def package_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    """A find-links directory of real wheels, built offline by uv."""
    root = tmp_path_factory.mktemp("docker-index")
    index = PackageIndex(root / "index")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UV_OFFLINE", "1")
        patch.setenv("UV_CACHE_DIR", str(root / "uv-cache"))
        for name, version in WHEELS:
            build_wheel(name, version, root / "sources", index.path)
    os.chmod(root, 0o755)
    yield index


@pytest.fixture(scope="module")
def image_id(docker_client: docker.DockerClient, python_image: PinnedImage) -> Iterator[str]:
    """The Python image with a label of this session: an image ID (and so volumes) of its own,
    whatever another session left behind; its volumes and itself are removed afterwards."""
    dockerfile = f"FROM {python_image.tag}\nLABEL org.repro-gate.test={uuid.uuid4().hex}\n"
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), rm=True)
    yield image.id
    for volume in docker_client.volumes.list(filters={"label": f"{IMAGE_LABEL}={image.id}"}):
        volume.remove(force=True)
    docker_client.images.remove(image.id, force=True)


def environments(client: docker.DockerClient, image: str, index: PackageIndex,
                 staging: Path, gate: str) -> DockerEnvironments:
    """A fresh builder (nothing remembered in memory): what it knows comes from the volumes."""
    return DockerEnvironments(client, image, PathTranslator(None), staging, gate, network="none",
                              index_args=index.args, read_only_paths=(index.path,))


def started(client: docker.DockerClient, gate: str, since: float) -> int:
    """Containers of `gate` started since `since` (they are removed once they end)."""
    events = client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                           filters={"type": "container", "event": "start",
                                    "label": f"{LABEL_GATE}={gate}"})
    return sum(1 for _ in events)


def test_built_in_the_image_once_reused_from_its_volume_and_seen_by_the_training(
    docker_client: docker.DockerClient, image_id: str, package_index: PackageIndex,
    gate_containers: GateContainers, workspace: Path, tmp_path: Path,
) -> None:
    gate = gate_containers.gate
    pins = {"numlib": "1.1"}
    before_build = time.time()
    built = environments(docker_client, image_id, package_index, tmp_path, gate)(pins)
    time.sleep(1.1)  # event times are whole seconds
    before_reuse = time.time()
    reused = environments(docker_client, image_id, package_index, tmp_path, gate)(pins)
    time.sleep(1.1)

    assert (built.reused, reused.reused) == (False, True)
    assert started(docker_client, gate, before_build) >= 2  # the build, then its seal
    assert started(docker_client, gate, before_reuse) == 0
    assert reused.volume == built.volume and built.volume is not None
    assert built.volume.startswith(VOLUME_PREFIX)
    assert len(built.volume) == len(VOLUME_PREFIX) + VOLUME_KEY_LENGTH
    assert (built.path, built.python) == (Path(str(ENV_ROOT)), Path(str(ENV_ROOT / "bin/python")))
    assert (reused.pins, reused.installed) == ({"numlib": "1.1"}, ("numlib",))
    assert gate_containers.list() == []  # every build container is gone

    run_dir = tmp_path / "out" / "runs" / "A"
    run_dir.mkdir(parents=True)
    code = ("import numlib, os, shutil, sys;"
            " print('seen', numlib.SCALE, sys.prefix, shutil.which('python'),"
            " os.environ['VIRTUAL_ENV'], bool(shutil.which('sh')))")
    spec = RunSpec(name="A", mode="deterministic", argv=["python", "-c", code], workdir=workspace,
                   run_dir=run_dir, env={}, timeout=120, log_path=tmp_path / "out" / "A.log",
                   python_path=[],
                   python_environment=PythonEnvironment(reused.path, reused.volume))
    launcher = DockerLauncher.connect(ContainerConfig(image=image_id), gate)
    outcome = launcher.run(spec, lambda line: None)

    log = spec.log_path.read_text()
    assert outcome.exit_code == 0, log
    # The pinned version, from the environment, which comes first on PATH; the image's own PATH
    # is still there after it (`sh` is found).
    root = str(ENV_ROOT)
    assert f"seen 0.5000001 {root} {root}/bin/python {root} True" in log


def test_pins_that_do_not_resolve_are_an_error_remembered_in_their_volume(
    docker_client: docker.DockerClient, image_id: str, package_index: PackageIndex,
    gate_containers: GateContainers, tmp_path: Path,
) -> None:
    gate = gate_containers.gate
    pins = {"harmless": "1.1", "leaf": "1.0"}  # harmless 1.1 needs leaf>=1.1
    with pytest.raises(GateError) as first:
        environments(docker_client, image_id, package_index, tmp_path, gate)(pins)
    time.sleep(1.1)
    before_again = time.time()
    with pytest.raises(GateError) as again:
        environments(docker_client, image_id, package_index, tmp_path, gate)(pins)
    time.sleep(1.1)

    assert first.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert "the pins do not resolve" in str(first.value) and "leaf" in str(first.value)
    assert "\n" not in str(first.value)
    assert (again.value.kind, str(again.value)) == (first.value.kind, str(first.value))
    assert started(docker_client, gate, before_again) == 0  # answered from the volume


def test_two_gates_building_the_same_environment_at_once_share_one_volume(
    image_id: str, package_index: PackageIndex, gate_containers: GateContainers, tmp_path: Path,
) -> None:
    pins = {"numlib": "1.1", "leaf": "1.0"}

    def build(_: int) -> Environment:
        client = docker.from_env()  # one client per gate, as two gates would have
        try:
            return environments(client, image_id, package_index, tmp_path,
                                gate_containers.gate)(pins)
        finally:
            client.close()

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(build, range(2))
    later = build(2)

    assert first.volume == second.volume == later.volume
    assert dataclasses.replace(first, reused=True) == dataclasses.replace(second, reused=True)
    assert later == dataclasses.replace(first, reused=True)  # one whole marker, read again


def test_for_config_builds_in_the_configured_image_on_a_network_the_training_lacks(
    python_image: PinnedImage, tmp_path: Path,
) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out", name="weekly",
                    container=ContainerConfig(image=python_image.reference),
                    upgrade=UpgradeConfig(inherit_site_packages=True))
    isolated = DockerEnvironments.for_config(config)
    proxied = DockerEnvironments.for_config(dataclasses.replace(
        config, container=ContainerConfig(image=python_image.reference, network="proxy")))

    assert isolated.image_id == python_image.image_id  # by digest, as the launcher runs it
    assert (isolated.network, proxied.network) == ("bridge", "proxy")
    assert (isolated.gate, isolated.inherit_site_packages) == ("weekly", True)
    assert isolated.staging_dir.is_relative_to(config.output_dir)


def test_from_a_gate_in_a_container_layered_over_the_images_own_packages(
    docker_client: docker.DockerClient, image_id: str, package_index: PackageIndex,
    gate_containers: GateContainers, tmp_path: Path,
) -> None:
    # Only these directories are "mounted into the gate's container": uv (in the test venv) is
    # not, so it is copied where the Docker host sees it.
    shared = [(str(tmp_path), str(tmp_path)), (str(package_index.path), str(package_index.path))]
    staging = tmp_path / "staging"
    build = DockerEnvironments(docker_client, image_id, PathTranslator(shared), staging,
                               gate_containers.gate, network="none", inherit_site_packages=True,
                               index_args=package_index.args,
                               read_only_paths=(package_index.path,))
    pip = importlib.metadata.version("pip")  # the image's pip is the test environment's

    environment = build({"numlib": "1.1", "pip": pip})

    assert (staging / "uv").is_file()
    assert environment.installed == ("numlib",)  # pip: the image's meets the pin
