"""A cancelled action: `docker kill --signal SIGTERM` on the action's container (the gate is its
PID 1) while a sibling training container runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import docker
import pytest
import yaml
from helpers.docker_fixtures import GateContainers, PinnedImage

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TRAIN = "import time\nprint('training started', flush=True)\ntime.sleep(600)\n"


def test_sigterm_to_the_action_stops_the_sibling_and_writes_a_cancelled_manifest(
    docker_client: docker.DockerClient,
    action_image: str,
    python_image: PinnedImage,
    gate_containers: GateContainers,
    workspace: Path,
) -> None:
    (workspace / "train.py").write_text(TRAIN)
    config = {"name": gate_containers.gate, "cost": {"enabled": False}}
    (workspace / ".repro-gate.yml").write_text(yaml.safe_dump(config))
    environment = {
        "INPUT_IMAGE": python_image.reference,
        "INPUT_COMMAND": "python train.py",
        "INPUT_GPUS": "none",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": "/github/workspace",
    }
    volumes = {
        "/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"},
        str(workspace): {"bind": "/github/workspace", "mode": "rw"},
    }
    action = docker_client.containers.run(
        action_image, working_dir="/github/workspace", environment=environment, volumes=volumes,
        detach=True,
    )
    log = workspace / "repro-gate-out" / "logs" / "A.log"
    try:
        deadline = time.monotonic() + 120
        while not (log.is_file() and "training started" in log.read_text()):
            assert time.monotonic() < deadline, action.logs().decode()
            time.sleep(0.2)
        assert [c.attrs["State"]["Status"] for c in gate_containers.list()] == ["running"]
        signalled = time.monotonic()
        action.kill(signal="SIGTERM")
        exit_code = action.wait(timeout=60)["StatusCode"]
        took = time.monotonic() - signalled
        output = action.logs().decode()
    finally:
        action.remove(force=True)

    assert exit_code == 2, output
    assert took < 5.0, f"the action took {took:.1f} s to stop"
    assert "Traceback" not in output
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["verdict"] == "error"
    assert manifest["reasons"][0]["code"] == "cancelled"
    assert manifest["reasons"][0]["message"].startswith("cancelled by SIGTERM during run A")
    assert gate_containers.list() == []
    assert "training started" in log.read_text()
