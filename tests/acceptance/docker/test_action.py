"""The action end to end: its image built from the Dockerfile, run the way the GitHub runner runs
a Docker action, starting the training as sibling containers through the Docker socket."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import docker
import pytest
import yaml
from helpers.docker_fixtures import GateContainers, PinnedImage
from helpers.github_env import read_outputs

from repro_gate.attestation.predicate import PREDICATE_TYPE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOKEN = "ghs_0123456789abcdefSECRET"

# Deterministic "training": writes a metrics file into the run directory, and what it could see.
TRAIN = """\
import json, os
run_dir = os.environ["REPRO_GATE_RUN_DIR"]
seen = {
    "uid": os.getuid(),
    "tokens": sorted(k for k in os.environ if "TOKEN" in k),
    "secret_in_env": any("SECRET" in v for v in os.environ.values()),
}
json.dump(seen, open(os.path.join(run_dir, "seen.json"), "w"))
json.dump({"loss": 0.125, "steps": 3}, open(os.path.join(run_dir, "metrics.json"), "w"))
print("::set-output name=verdict::forged")
print("trained")
"""


def run_action(
    client: docker.DockerClient, image: str, environment: dict[str, str],
    volumes: dict[str, dict[str, str]], timeout: int,
) -> tuple[int, str]:
    """Run the action's container in the workspace as the runner does: its exit code and log."""
    action = client.containers.run(image, working_dir="/github/workspace",
                                   environment=environment, volumes=volumes, detach=True)
    try:
        return action.wait(timeout=timeout)["StatusCode"], action.logs().decode()
    finally:
        action.remove(force=True)


def test_action_runs_the_gate_in_sibling_containers(
    docker_client: docker.DockerClient,
    action_image: str,
    python_image: PinnedImage,
    gate_containers: GateContainers,
    workspace: Path,
    tmp_path: Path,
) -> None:
    (workspace / "train.py").write_text(TRAIN)
    config = {"name": gate_containers.gate, "container": {"keep": True}, "cost": {"enabled": False}}
    (workspace / ".repro-gate.yml").write_text(yaml.safe_dump(config))
    file_commands = tmp_path / "file_commands"
    home, workflow = tmp_path / "home", tmp_path / "workflow"
    for directory in (file_commands, home, workflow):
        directory.mkdir()
    (workflow / "event.json").write_text("{}")
    environment = {
        "INPUT_IMAGE": python_image.reference,
        "INPUT_COMMAND": "python train.py",
        "INPUT_ARTIFACTS": "metrics.json",
        "INPUT_GPUS": "none",
        "INPUT_TIMEOUT": "120",
        "INPUT_GITHUB-TOKEN": TOKEN,
        "INPUT_CONFIG": "",
        "INPUT_ATTEST": "true",
        "GITHUB_TOKEN": TOKEN,
        "ACTIONS_RUNTIME_TOKEN": "runtime-SECRET",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "HOME": "/github/home",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": "/github/workflow/event.json",
        "GITHUB_OUTPUT": "/github/file_commands/set_output_1",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary_1",
        "GITHUB_REPOSITORY": "example-org/example",
    }
    volumes = {
        "/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"},
        str(home): {"bind": "/github/home", "mode": "rw"},
        str(workflow): {"bind": "/github/workflow", "mode": "rw"},
        str(file_commands): {"bind": "/github/file_commands", "mode": "rw"},
        str(workspace): {"bind": "/github/workspace", "mode": "rw"},
    }
    exit_code, log = run_action(docker_client, action_image, environment, volumes,
                                timeout=240)

    assert exit_code == 0, log
    outputs = read_outputs(file_commands / "set_output_1")
    assert outputs["verdict"] == "pass"
    assert outputs["manifest-path"] == "/github/workspace/repro-gate-out/manifest.json"
    assert outputs["first-divergent-step"] == ""
    # attest: true: actions/attest's inputs, relative to the workspace the next step runs in.
    assert outputs["predicate-path"] == "repro-gate-out/predicate.json"
    assert outputs["predicate-type"] == PREDICATE_TYPE
    [subject] = outputs["subject-path"].splitlines()
    assert subject.startswith("repro-gate-out/runs/A/") and subject.endswith("/metrics.json")
    statement = json.loads((workspace / "repro-gate-out" / "attestation.intoto.json").read_text())
    assert statement["subject"] == [{"name": "metrics.json", "digest": {
        "sha256": hashlib.sha256((workspace / subject).read_bytes()).hexdigest()}}]
    assert statement["predicate"]["launcher"] == "docker"
    summary = (file_commands / "step_summary_1").read_text()
    assert summary.splitlines()[0].startswith(f"### ✅ {gate_containers.gate}:")
    assert "**Verdict:** pass" in summary

    # Workflow commands: the token masked, each run folded, the training's own commands inert.
    lines = log.splitlines()
    assert f"::add-mask::{TOKEN}" in lines
    assert "::group::repro-gate run A" in lines and "::group::repro-gate run B" in lines
    forged = lines.index("[A] ::set-output name=verdict::forged")
    assert any(line.startswith("::stop-commands::") for line in lines[:forged])
    assert TOKEN not in "\n".join(line for line in lines if not line.startswith("::add-mask::"))

    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert outputs["config-hash"] == manifest.get("config_hash", "")
    assert [run["name"] for run in manifest["runs"]] == ["A", "B"]
    for run in manifest["runs"]:
        assert run["launcher"] == "docker"
        assert run["container"]["image"]["id"] == python_image.image_id
        assert python_image.repo_digest in run["container"]["image"]["repo_digests"]
        seen = json.loads((workspace / "repro-gate-out" / "runs" / run["name"] / "seen.json")
                          .read_text())
        assert seen == {"uid": 65534, "tokens": [], "secret_in_env": False}

    # The sibling containers: the user's image, isolated, bind mounts translated to host paths.
    siblings = gate_containers.list()
    assert len(siblings) == 2
    for sibling in siblings:
        attrs = sibling.attrs
        assert attrs["Image"] == python_image.image_id
        assert attrs["State"]["ExitCode"] == 0
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["ReadonlyRootfs"] is True
        assert attrs["Config"]["User"] == "65534:65534"
        mounts = {m["Destination"]: m for m in attrs["Mounts"]}
        run_name = attrs["Config"]["Labels"]["org.repro-gate.run"]
        run_mount = mounts[f"/github/workspace/repro-gate-out/runs/{run_name}"]
        assert run_mount["Source"] == str(workspace / "repro-gate-out" / "runs" / run_name)
        assert run_mount["RW"] is True
        # It starts in its own writable copy of the workspace (made at one path for every run,
        # moved into its run directory afterwards), seen at the workspace's own path: the
        # workspace itself is not mounted.
        assert attrs["Config"]["WorkingDir"] == "/github/workspace"
        copy = mounts["/github/workspace"]
        assert (copy["Source"], copy["RW"]) == (str(workspace / "repro-gate-out" / "work"), True)
        assert "/repro-gate/python-path/0" in mounts


def test_bad_input_gives_error_outputs_without_running(
    docker_client: docker.DockerClient,
    action_image: str,
    gate_containers: GateContainers,
    workspace: Path,
    tmp_path: Path,
) -> None:
    file_commands = tmp_path / "file_commands"
    file_commands.mkdir()
    environment = {
        "INPUT_RUNS": "two",
        "INPUT_NAME": gate_containers.gate,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_OUTPUT": "/github/file_commands/set_output_2",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary_2",
    }
    volumes = {
        str(file_commands): {"bind": "/github/file_commands", "mode": "rw"},
        str(workspace): {"bind": "/github/workspace", "mode": "rw"},
    }
    exit_code, log = run_action(docker_client, action_image, environment, volumes,
                                timeout=60)

    assert exit_code == 2
    assert "::error title=repro-gate::input runs: must be a number, got 'two'" in log.splitlines()
    assert read_outputs(file_commands / "set_output_2")["verdict"] == "error"
    assert "**Verdict:** error" in (file_commands / "step_summary_2").read_text()
    assert gate_containers.list() == []


@pytest.mark.parametrize("command", ["", "python3 train.py"])
def test_without_image_a_python_training_is_refused_before_any_run(
    docker_client: docker.DockerClient,
    action_image: str,
    gate_containers: GateContainers,
    workspace: Path,
    tmp_path: Path,
    command: str,
) -> None:
    """The action's own image has no torch: the reference training (no command) and a Python
    command are refused in one line that says to set `image`, before any run starts."""
    (workspace / "train.py").write_text("import torch\n")
    file_commands = tmp_path / "file_commands"
    file_commands.mkdir()
    environment = {
        "INPUT_COMMAND": command,
        "INPUT_NAME": gate_containers.gate,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_OUTPUT": "/github/file_commands/set_output_3",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary_3",
    }
    volumes = {
        str(file_commands): {"bind": "/github/file_commands", "mode": "rw"},
        str(workspace): {"bind": "/github/workspace", "mode": "rw"},
    }
    exit_code, log = run_action(docker_client, action_image, environment, volumes,
                                timeout=120)

    assert exit_code == 2, log
    (line,) = [line for line in log.splitlines() if line.startswith("repro-gate: error:")]
    assert "import torch" in line and "set the input `image`" in line
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert [reason["code"] for reason in manifest["reasons"]] == ["image_required"]
    assert manifest["runs"] == []
    assert read_outputs(file_commands / "set_output_3")["verdict"] == "error"
    assert gate_containers.list() == []
