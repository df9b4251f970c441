"""The Docker launcher on a real Docker Engine: pinning, isolation, timeout, errors, clean-up."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from helpers.docker_fixtures import GateContainers, PinnedImage
from helpers.rootfs import write_rootfs

from repro_gate.config import ContainerConfig
from repro_gate.errors import GateError
from repro_gate.launch import docker_image
from repro_gate.launch.base import RunSpec
from repro_gate.launch.docker import DockerLauncher
from repro_gate.probe import INJECT_DIR

pytestmark = pytest.mark.docker

# Runs inside the training container and writes what it could and could not do.
ISOLATION_PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    facts = {"uid": os.getuid(), "gid": os.getgid(), "env": dict(os.environ)}
    def attempt(name, action):
        try:
            action()
            facts[name] = "ok"
        except OSError as error:
            facts[name] = type(error).__name__ + ": " + str(error)
    def connect():
        with socket.create_connection(("1.1.1.1", 53), timeout=3):
            pass
    attempt("network", connect)
    attempt("write_workspace", lambda: open("written-by-training", "w").close())
    attempt("write_root", lambda: open("/usr/written-by-training", "w").close())
    attempt("write_tmp", lambda: open("/tmp/scratch", "w").close())
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    facts["cap_eff"] = status["CapEff"].strip()
    facts["no_new_privs"] = status["NoNewPrivs"].strip()
    facts["interfaces"] = sorted(name for _, name in socket.if_nameindex())
    facts["sys_path"] = sys.path
    run_dir = os.environ["REPRO_GATE_RUN_DIR"]
    with open(os.path.join(run_dir, "facts.json"), "w") as handle:
        json.dump(facts, handle)
    print("line one")
    print("line two", flush=True)
    """
)


def make_spec(workspace: Path, tmp_path: Path, argv: list[str], **changes: object) -> RunSpec:
    run_dir = tmp_path / "out" / "runs" / "A"
    run_dir.mkdir(parents=True)
    spec = RunSpec(
        name="A",
        mode="deterministic",
        argv=argv,
        workdir=workspace,
        run_dir=run_dir,
        env={"REPRO_GATE_MODE": "deterministic", "REPRO_GATE_SEED": "0"},
        timeout=120,
        log_path=tmp_path / "out" / "logs" / "A.log",
        python_path=[INJECT_DIR],
    )
    for key, value in changes.items():
        setattr(spec, key, value)
    return spec


def launcher_for(
    image: str, gate: str, environ: dict[str, str], **container: Any
) -> DockerLauncher:
    launcher = DockerLauncher.connect(ContainerConfig(image=image, **container), gate)
    launcher.environ = environ
    return launcher


def test_pinned_run_is_isolated_and_records_its_image(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "probe_isolation.py").write_text(ISOLATION_PROBE)
    environ = {"GITHUB_TOKEN": "ghs_secret", "ACTIONS_RUNTIME_TOKEN": "rt", "ALLOWED_VAR": "yes"}
    launcher = launcher_for(
        python_image.reference,
        gate_containers.gate,
        environ,
        env_allow=("ALLOWED_VAR",), memory="512m", pids=256, keep=True,
    )
    spec = make_spec(workspace, tmp_path, ["python", "probe_isolation.py"])
    lines: list[str] = []

    outcome = launcher.run(spec, lines.append)

    assert outcome.exit_code == 0, spec.log_path.read_text()
    image = outcome.details["image"]
    assert image["reference"] == python_image.reference
    assert image["id"] == python_image.image_id
    assert python_image.repo_digest in image["repo_digests"]
    assert outcome.details["container"]["image"] == outcome.details["image"]
    assert lines[-2:] == ["line one", "line two"]
    assert spec.log_path.read_text().splitlines()[-2:] == ["line one", "line two"]

    facts = json.loads((spec.run_dir / "facts.json").read_text())
    assert facts["uid"] != 0 and facts["gid"] != 0
    assert facts["network"].startswith("OSError") and facts["interfaces"] == ["lo"]
    assert "Read-only file system" in facts["write_workspace"]
    assert not (workspace / "written-by-training").exists()
    assert "Read-only file system" in facts["write_root"]
    assert facts["write_tmp"] == "ok"
    assert facts["cap_eff"] == "0000000000000000"
    assert facts["no_new_privs"] == "1"
    env = facts["env"]
    assert "GITHUB_TOKEN" not in env and "ACTIONS_RUNTIME_TOKEN" not in env
    assert env["ALLOWED_VAR"] == "yes"
    assert env["REPRO_GATE_RUN_DIR"] == str(spec.run_dir)
    assert env["REPRO_GATE_MODE"] == "deterministic"
    assert env["PYTHONPATH"].split(":")[0] == "/repro-gate/python-path/0"
    assert "/repro-gate/python-path/0" in facts["sys_path"]

    (kept,) = gate_containers.list()
    host = kept.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["Memory"] == 512 * 1024 * 1024
    assert host["PidsLimit"] == 256
    assert host["Init"] is True
    assert kept.attrs["Image"] == python_image.image_id
    mounts = {m["Destination"]: m for m in kept.attrs["Mounts"]}
    assert mounts[str(workspace)]["RW"] is False
    assert mounts[str(spec.run_dir)]["RW"] is True
    assert mounts["/repro-gate/python-path/0"]["RW"] is False


def test_timeout_kills_the_container_and_nothing_is_left(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    launcher = launcher_for(python_image.reference, gate_containers.gate, {})
    argv = ["python", "-c", "import time; print('started', flush=True); time.sleep(300)"]
    spec = make_spec(workspace, tmp_path, argv, timeout=3)
    lines: list[str] = []

    outcome = launcher.run(spec, lines.append)

    assert outcome.timed_out is True
    assert outcome.exit_code is None
    assert outcome.wall_seconds < 60
    assert lines == ["started"]
    assert gate_containers.list() == []


def test_the_gates_folders_are_masked_and_the_gate_stops_a_run_when_it_asks(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    output, lock = workspace / "repro-gate-out", workspace / ".repro-gate-workdir"
    (output / "runs" / "A").mkdir(parents=True)
    (output / "runs" / "A" / "seed").write_text("1234\n")
    (output / "logs").mkdir()
    (output / "logs" / "A.log").write_text("seed 1234\n")
    lock.mkdir()
    (lock / "lock").write_text("1\n")
    copy = output / "work"
    copy.mkdir()
    (copy / "look.py").write_text(
        "import json, os, time\n"
        f"print(json.dumps([sorted(os.listdir(p)) for p in"
        f" ({str(output)!r}, {str(output / 'runs')!r}, {str(lock)!r})]), flush=True)\n"
        "while True:\n    time.sleep(1)\n")
    launcher = launcher_for(python_image.reference, gate_containers.gate, {})
    spec = make_spec(workspace, tmp_path, ["python", "look.py"])
    spec.workdir, spec.workspace = copy, workspace  # the run's copy, the gate's runs' way
    spec.run_dir, spec.hidden = output / "runs" / "B", (output, lock)
    spec.run_dir.mkdir()
    lines: list[str] = []

    def sink(line: str) -> None:
        lines.append(line)
        spec.stop.set()  # what fail-fast does at a divergent step

    outcome = launcher.run(spec, sink)

    # Only the mount point of the run's own folder, nothing of run A, the logs or the lock.
    assert lines == [json.dumps([["runs"], ["B"], []])]
    assert (outcome.timed_out, outcome.wall_seconds < 60) == (False, True)
    assert gate_containers.list() == []


def test_exit_code_of_a_failing_training_is_reported(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    launcher = launcher_for(python_image.reference, gate_containers.gate, {})
    spec = make_spec(workspace, tmp_path, ["python", "-c", "raise SystemExit(3)"])

    outcome = launcher.run(spec, lambda line: None)

    assert outcome.exit_code == 3 and outcome.timed_out is False
    assert gate_containers.list() == []


def test_gpus_without_gpu_support_is_a_clear_error(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    if docker.from_env().info().get("Runtimes", {}).get("nvidia"):
        pytest.skip("this Docker host has the NVIDIA runtime")
    launcher = launcher_for(python_image.reference, gate_containers.gate, {})
    launcher.settings = dataclasses.replace(launcher.settings, gpus="all")

    with pytest.raises(GateError) as raised:
        launcher.run(make_spec(workspace, tmp_path, ["python", "-V"]), lambda line: None)

    assert raised.value.kind == "docker"
    assert str(raised.value).startswith("cannot start the container for run A: ")
    assert str(raised.value).endswith(
        "(gpus: all): the Docker host has no GPU support; install the NVIDIA Container Toolkit"
        " there, or set gpus: none"
    )
    assert gate_containers.list() == []


def test_missing_image_is_a_clear_error(
    registry: str, gate_containers: GateContainers, workspace: Path, tmp_path: Path
) -> None:
    reference = f"{registry}/repro-gate-test/absent@sha256:{'0' * 64}"
    launcher = launcher_for(reference, gate_containers.gate, {})

    with pytest.raises(GateError) as raised:
        launcher.run(make_spec(workspace, tmp_path, ["python", "-V"]), lambda line: None)

    assert raised.value.kind == "image_not_found"
    assert str(raised.value).startswith(
        f"image {reference} not found locally and could not be pulled: "
    )
    assert "\n" not in str(raised.value)
    assert gate_containers.list() == []


def test_image_absent_locally_is_pulled_by_digest(
    docker_client: docker.DockerClient, registry: str, tmp_path: Path
) -> None:
    tar_path = tmp_path / "tiny.tar"
    marker = tmp_path / "marker.txt"
    marker.write_text(str(tmp_path))  # a unique layer, so the pull really transfers it
    write_rootfs(tar_path, [(marker, "/marker.txt")], set())
    repository = f"{registry}/repro-gate-test/tiny"
    docker_client.api.import_image_from_file(str(tar_path), repository=repository, tag="t")
    for event in docker_client.images.push(repository, "t", stream=True, decode=True):
        assert "error" not in event, event
    pushed = docker_client.images.get(f"{repository}:t")
    digest_reference = pushed.attrs["RepoDigests"][0]
    docker_client.images.remove(pushed.id, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(digest_reference)

    pulled = docker_image.resolve(docker_client, digest_reference)

    assert pulled.id == pushed.id
    assert digest_reference in pulled.attrs["RepoDigests"]
    docker_client.images.remove(pulled.id, force=True)


def test_unreachable_daemon_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")

    with pytest.raises(GateError) as raised:
        DockerLauncher.connect(ContainerConfig(image="example/train@sha256:" + "1" * 64), "g")

    assert raised.value.kind == "docker"
    assert str(raised.value).startswith(f"cannot reach the Docker daemon at unix://{tmp_path}")
