"""The Docker launcher's pure parts: GPU requests, the daemon connection's
error and the training container's environment (no container is started)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import docker
import pytest
from docker.models.images import Image

from repro_gate.config import ContainerConfig
from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import PythonEnvironment, RunSpec
from repro_gate.launch.docker import DockerLauncher, connect, device_requests
from repro_gate.launch.host_paths import PathTranslator
from repro_gate.launch.shell_assignments import GATE_PYTHONPATH
from repro_gate.probe import ENV_RUN_DIR

# A client object that is never asked anything: its daemon does not exist.
NOWHERE = "unix:///nonexistent/docker.sock"
IMAGE = Image(attrs={"Id": "sha256:" + "a" * 64,
                     "RepoDigests": ["registry.example/t@sha256:" + "b" * 64],
                     "Config": {"Env": ["PATH=/opt/conda/bin:/usr/bin", "PYTHONPATH=/app",
                                        "BROKEN"]}})


def launcher(**settings: object) -> DockerLauncher:
    config = dataclasses.replace(ContainerConfig(image="registry.example/t:1"), **settings)
    client = docker.DockerClient(base_url=NOWHERE, version="1.44")
    return DockerLauncher(config, "gate", client, PathTranslator(None),
                          environ={"HF_TOKEN": "hf_x", "GITHUB_TOKEN": "ghs_x", "HOME": "/root"})


def spec(tmp_path: Path, **extra: object) -> RunSpec:
    base = RunSpec("A", "deterministic", ["python", "t.py"], tmp_path / "work", tmp_path / "A",
                   {"REPRO_GATE_MODE": "deterministic"}, None, tmp_path / "A.log", [])
    return dataclasses.replace(base, **extra)


def test_gpu_requests_follow_the_docker_cli() -> None:
    (every,) = device_requests("all")
    (two,) = device_requests(2)
    (chosen,) = device_requests(("0", "GPU-8f2a"))

    assert (every["Count"], every["Capabilities"]) == (-1, [["gpu"]])
    assert (two["Count"], two["DeviceIDs"]) == (2, [])
    assert (chosen["DeviceIDs"], chosen["Count"]) == (["0", "GPU-8f2a"], 0)
    assert device_requests("none") == device_requests(0) == device_requests(None) == []


def test_an_unreachable_daemon_is_a_one_line_docker_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)

    with pytest.raises(GateError) as raised:
        connect()

    assert raised.value.kind == ErrorKind.DOCKER
    assert raised.value.message.startswith(f"cannot reach the Docker daemon at {NOWHERE}: ")


def test_a_docker_launcher_needs_an_image() -> None:
    with pytest.raises(ValueError, match="needs an image"):
        DockerLauncher(ContainerConfig(), "gate",
                       docker.DockerClient(base_url=NOWHERE, version="1.44"),
                       PathTranslator(None))


def test_only_allowed_variables_of_the_gate_reach_the_container(tmp_path: Path) -> None:
    env = launcher(env_allow=("HF_TOKEN", "ABSENT"))._environment(
        spec(tmp_path), IMAGE,
        ["/repro-gate/python-path/0"])

    assert env == {"HF_TOKEN": "hf_x", "REPRO_GATE_MODE": "deterministic",
                   ENV_RUN_DIR: str(tmp_path / "A"),
                   "PYTHONPATH": "/repro-gate/python-path/0:/app",
                   GATE_PYTHONPATH: "/repro-gate/python-path/0",
                   "PYTHONUNBUFFERED": "1", "HOME": "/tmp"}


def test_an_environment_goes_first_on_the_images_own_path(tmp_path: Path) -> None:
    run = spec(tmp_path, python_environment=PythonEnvironment(Path("/opt/repro-gate/env"), "v"),
               env={"HOME": "/work"})

    env = launcher()._environment(run, IMAGE, [])

    assert env["PATH"] == "/opt/repro-gate/env/bin:/opt/conda/bin:/usr/bin"
    assert env["VIRTUAL_ENV"] == "/opt/repro-gate/env"
    assert env["HOME"] == "/work"  # the run's own value is kept
    assert env["PYTHONPATH"] == "/app"
