"""The runner service's test infrastructure itself: the private dockerd with the no-op NVIDIA
hook, and the stand-in runner image run by hand as the service would run it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.types
import pytest
from helpers.fake_runners import ActionsState, runner_route
from helpers.gpu_dockerd import GpuDockerd

from repro_gate.runner import hook
from repro_gate.runner.slots import Slot

SLOT_UUID = "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b"
OTHER_UUID = "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"
RESULT_PREFIX = "STANDIN-RESULT "
SCOPE = ["repos", "octo-org", "trainer"]
RUNNER_UID = "1001"  # the actions/runner image's user


def gpu_request(uuid: str) -> docker.types.DeviceRequest:
    """The device request the service gives a slot's runner container."""
    return docker.types.DeviceRequest(driver="nvidia", device_ids=[uuid],
                                      capabilities=[["gpu"]])


def jit_config(work_folder: Path) -> tuple[int, str]:
    """(runner id, encoded JIT config) as the fake GitHub hands them out."""
    body = {"name": "repro-gate-gpuhost-slot0", "runner_group_id": 1,
            "labels": ["self-hosted", "gpu"], "work_folder": str(work_folder)}
    reply = runner_route(ActionsState(), "POST", [*SCOPE, "actions", "runners",
                                                  "generate-jitconfig"], {}, body, "http://fake")
    assert reply is not None and reply[0] == 201
    return reply[2]["runner"]["id"], reply[2]["encoded_jit_config"]


@dataclass(frozen=True)
class StandinRun:
    exit_code: int
    output: str
    container: str  # its ID
    runner_id: int  # in the JIT config it was given


def run_standin(daemon: GpuDockerd, image: str, tmp_path: Path, user: str = "root",
                **extra: str) -> StandinRun:
    """The stand-in started as the service starts a runner (environment, mounts, GPU)."""
    work, status = tmp_path / "slot0" / "work", tmp_path / "slot0" / "status"
    for folder in (work, status):
        folder.mkdir(parents=True)
        folder.chmod(0o777)  # uid 1001 writes there too
    installed = hook.install(tmp_path / "hooks")
    runner_id, encoded = jit_config(work)
    environment = {**hook.runner_environment(Slot(0, SLOT_UUID, "NVIDIA H100 80GB HBM3")),
                   "ACTIONS_RUNNER_INPUT_JITCONFIG": encoded,
                   "REPRO_GATE_HOOK_ALLOW_NO_GPU": "1", **extra}
    volumes = {str(installed.script.parent): {"bind": hook.CONTAINER_HOOK_DIR, "mode": "ro"},
               str(work): {"bind": str(work), "mode": "rw"},
               str(status): {"bind": hook.CONTAINER_STATUS_DIR, "mode": "rw"}}
    container = daemon.client.containers.create(
        image, ["/home/runner/run.sh"], environment=environment, volumes=volumes, user=user,
        network=daemon.network, device_requests=[gpu_request(SLOT_UUID)])
    try:
        container.start()
        code = container.wait(timeout=60)["StatusCode"]
        return StandinRun(code, container.logs().decode(), container.id, runner_id)
    finally:
        container.remove(force=True)


def standin_result(output: str) -> dict[str, object]:
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    assert len(lines) == 1, output
    return dict(json.loads(lines[0].removeprefix(RESULT_PREFIX)))


def test_a_device_request_by_uuid_starts_and_the_hook_sees_that_uuid(
        gpu_dockerd: GpuDockerd, standin_runner_image: str) -> None:
    container = gpu_dockerd.client.containers.run(
        standin_runner_image, ["sh", "-c", 'echo "$NVIDIA_VISIBLE_DEVICES"'], detach=True,
        network=gpu_dockerd.network, device_requests=[gpu_request(OTHER_UUID)])
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0
        assert container.logs().decode().strip() == OTHER_UUID
        assert gpu_dockerd.visible_devices()[container.id] == OTHER_UUID
    finally:
        container.remove(force=True)


@pytest.mark.parametrize("user", ["root", RUNNER_UID])
def test_the_standin_runs_the_hook_then_the_job_with_the_slots_gpu(
        gpu_dockerd: GpuDockerd, standin_runner_image: str, tmp_path: Path, user: str) -> None:
    job = 'echo "$REPRO_GATE_GPUS" > gpus.txt'
    run = run_standin(gpu_dockerd, standin_runner_image, tmp_path, user, STANDIN_JOB=job)
    assert run.exit_code == 0, run.output
    result = standin_result(run.output)
    assert result["hook_exit"] == 0 and result["job_exit"] == 0, run.output
    assert f"REPRO_GATE_GPUS={SLOT_UUID}" in str(result["github_env"]).splitlines()
    work = tmp_path / "slot0" / "work"
    assert (work / "repo" / "repo" / "gpus.txt").read_text().strip() == SLOT_UUID
    assert result["runner_id"] == run.runner_id
    assert gpu_dockerd.visible_devices()[run.container] == SLOT_UUID
    status = hook.read_status(tmp_path / "slot0" / "status")  # as the service reads it
    assert status == hook.HookStatus(hook.HookOutcome.ACCEPTED, SLOT_UUID)


def test_the_standin_skips_the_job_when_the_hook_refuses(
        gpu_dockerd: GpuDockerd, standin_runner_image: str, tmp_path: Path) -> None:
    run = run_standin(gpu_dockerd, standin_runner_image, tmp_path,
                      REPRO_GATE_HOOK_ALLOW_NO_GPU="0", STANDIN_JOB="exit 9")
    assert run.exit_code == 0, run.output
    result = standin_result(run.output)
    assert result["hook_exit"] == 1 and result["job_exit"] is None
    assert result["github_env"] == ""
    assert "refusing the job: no GPU visible" in run.output
    status = hook.read_status(tmp_path / "slot0" / "status")
    assert status is not None and status.outcome is hook.HookOutcome.REFUSED


@pytest.mark.parametrize(("visible", "hook_exit"), [(None, 0), (OTHER_UUID, 1)])
def test_the_hook_checks_what_nvidia_smi_lists_in_the_container(
        gpu_dockerd: GpuDockerd, standin_runner_image: str, tmp_path: Path,
        visible: str | None, hook_exit: int) -> None:
    extra = {"STANDIN_VISIBLE_GPUS": visible} if visible else {}
    run = run_standin(gpu_dockerd, standin_runner_image, tmp_path, STANDIN_NVIDIA_SMI="1",
                      REPRO_GATE_HOOK_ALLOW_NO_GPU="0", **extra)
    result = standin_result(run.output)
    assert result["hook_exit"] == hook_exit, run.output
    if visible is None:  # the device request's GPU, as the NVIDIA runtime shows it
        assert f"{SLOT_UUID} is visible and healthy" in run.output
    else:
        assert (f"refusing the job: GPU {SLOT_UUID} is not visible in this runner"
                f" (visible: {OTHER_UUID})") in run.output


def test_the_standin_crashes_on_request(gpu_dockerd: GpuDockerd, standin_runner_image: str,
                                        tmp_path: Path) -> None:
    run = run_standin(gpu_dockerd, standin_runner_image, tmp_path, STANDIN_CRASH="1")
    assert run.exit_code == 3
    assert RESULT_PREFIX not in run.output


def test_a_restart_keeps_the_images(gpu_dockerd: GpuDockerd, standin_runner_image: str) -> None:
    image = gpu_dockerd.client.images.get(standin_runner_image).id
    gpu_dockerd.restart()
    assert gpu_dockerd.client.images.get(standin_runner_image).id == image
    output = gpu_dockerd.client.containers.run(standin_runner_image, ["sh", "-c", "echo up"],
                                               network=gpu_dockerd.network, remove=True)
    assert output.decode().strip() == "up"
