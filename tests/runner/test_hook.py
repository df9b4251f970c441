"""The job-started hook: the installed script run as the Actions runner runs it, with a
$GITHUB_ENV file and the slot's UUID; its health judgement on recorded NVML values.

This machine has no NVIDIA driver, so the hook falls back to `nvidia-smi -L`; a stand-in on
PATH prints the recorded output of a two-GPU host (MIG instances listed the way nvidia-smi does).
Where NVML answers (a GPU host), those tests are skipped and `test_on_this_gpu` runs instead.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers.runner_files import SLOT_UUIDS

from repro_gate.runner import hook
from repro_gate.runner.slots import Slot

MIG = "MIG-11111111-2222-4333-8444-555555555555"
NVIDIA_SMI_L = f"""GPU 0: NVIDIA H100 80GB HBM3 (UUID: {SLOT_UUIDS[0]})
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d)
  MIG 3g.20gb     Device  0: (UUID: {MIG})
"""


def check_module() -> ModuleType:
    path = Path(hook.__file__).parent / hook.CHECK_MODULE
    spec = importlib.util.spec_from_file_location("repro_gate_job_started", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = check_module()
NVML_ANSWERS = "error" not in CHECK.read_nvml()
needs_no_nvml = pytest.mark.skipif(NVML_ANSWERS, reason="NVML answers here: see test_on_this_gpu")


def status_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "status"
    folder.mkdir(exist_ok=True)
    return folder


def run_hook(tmp_path: Path, uuid: str, *, smi: bool = True, **extra: str
             ) -> tuple[subprocess.CompletedProcess[str], str]:
    """The installed `.sh` as the runner runs it; (result, what it left in $GITHUB_ENV)."""
    installed = hook.install(tmp_path / "hooks")
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "python3").unlink(missing_ok=True)
    (tools / "python3").symlink_to(sys.executable)
    if smi:
        (tools / "nvidia-smi").write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI_L}EOF\n")
        (tools / "nvidia-smi").chmod(0o755)
    github_env = tmp_path / "github_env"
    github_env.write_text("EARLIER=1\n")
    # The service's variables, with the host paths of this test for the container's.
    env = {"PATH": f"{tools}:/usr/bin:/bin", "GITHUB_ENV": str(github_env),
           **hook.runner_environment(Slot(0, uuid, "x")),
           hook.HOOK_VARIABLE: str(installed.script),
           hook.STATUS_VARIABLE: str(status_dir(tmp_path) / hook.STATUS_FILE), **extra}
    # The runner runs a `.sh` hook with bash -e.
    result = subprocess.run(["bash", "-e", env[hook.HOOK_VARIABLE]], env=env,
                            capture_output=True, text=True, timeout=60)
    return result, github_env.read_text()


@needs_no_nvml
@pytest.mark.parametrize("uuid", [SLOT_UUIDS[0], MIG])
def test_the_slot_gpu_is_handed_to_the_job(tmp_path: Path, uuid: str) -> None:
    result, github_env = run_hook(tmp_path, uuid)
    assert result.returncode == 0, result.stderr
    assert github_env == f"EARLIER=1\nREPRO_GATE_GPUS={uuid}\n"
    assert result.stdout == (f"repro-gate hook: {uuid} is visible and healthy; the job gets it"
                             " as REPRO_GATE_GPUS\n")


@needs_no_nvml
def test_another_gpu_is_refused(tmp_path: Path) -> None:
    result, github_env = run_hook(tmp_path, SLOT_UUIDS[1])
    assert result.returncode == 1
    assert result.stderr == (
        f"repro-gate hook: refusing the job: GPU {SLOT_UUIDS[1]} is not visible in this runner"
        f" (visible: {SLOT_UUIDS[0]}, GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d, {MIG})\n")
    assert github_env == "EARLIER=1\n"


@needs_no_nvml
def test_no_gpu_tool_is_refused_unless_allowed(tmp_path: Path) -> None:
    result, github_env = run_hook(tmp_path, SLOT_UUIDS[0], smi=False)
    assert result.returncode == 1
    assert result.stderr.startswith("repro-gate hook: refusing the job: no GPU visible: neither"
                                    " NVML nor nvidia-smi answers in this runner")
    assert result.stderr.count("\n") == 1 and github_env == "EARLIER=1\n"
    allowed, github_env = run_hook(tmp_path, SLOT_UUIDS[0], smi=False,
                                   REPRO_GATE_HOOK_ALLOW_NO_GPU="1")
    assert allowed.returncode == 0, allowed.stderr
    assert github_env == f"EARLIER=1\nREPRO_GATE_GPUS={SLOT_UUIDS[0]}\n"
    assert "handed to the job unchecked" in allowed.stderr


def test_the_allow_flag_never_overrides_a_failed_check(tmp_path: Path) -> None:
    if NVML_ANSWERS:
        pytest.skip("NVML answers here")
    result, _ = run_hook(tmp_path, SLOT_UUIDS[1], REPRO_GATE_HOOK_ALLOW_NO_GPU="1")
    assert result.returncode == 1 and "is not visible in this runner" in result.stderr


def test_a_runner_not_started_by_the_service_is_refused(tmp_path: Path) -> None:
    result, github_env = run_hook(tmp_path, "GPU-1\nREPRO_GATE_GPUS=all")
    assert result.returncode == 1
    assert "REPRO_GATE_SLOT_UUID is 'GPU-1\\nREPRO_GATE_GPUS=all', not a GPU-/MIG- UUID" in (
        result.stderr)
    assert github_env == "EARLIER=1\n"


# `read_nvml()` of the hook on a healthy H100 and on GPUs with each problem it refuses.
HEALTHY = {"uuid": SLOT_UUIDS[0], "mig_uuids": [], "ecc_uncorrected_volatile": 0,
           "retired_pages_pending": 0, "remapped_rows": (0, 0, False, False), "temperature": 41,
           "slowdown_temperature": 87}


@pytest.mark.parametrize(("change", "problem"), [
    ({}, None),
    ({"ecc_uncorrected_volatile": {"error": "Not Supported"},
      "remapped_rows": {"error": "Not Supported"}}, None),
    ({"ecc_uncorrected_volatile": 2}, "has 2 uncorrectable ECC errors since the driver loaded"),
    ({"retired_pages_pending": 1}, "has retired pages pending (reset the GPU)"),
    ({"remapped_rows": (0, 1, True, False)}, "has a row remap pending (reset the GPU)"),
    ({"remapped_rows": (0, 1, False, True)}, "has a row remap failed (reset the GPU)"),
    ({"temperature": 88}, "is at 88 C, at or over its slowdown threshold 87 C"),
])
def test_health_from_recorded_nvml_values(change: dict, problem: str | None) -> None:
    raw = {"source": "nvml", "devices": [{**HEALTHY, **change}]}
    found = CHECK.judge(raw, SLOT_UUIDS[0])
    assert found == (None if problem is None else f"GPU {SLOT_UUIDS[0]} {problem}")


@needs_no_nvml
def test_a_runner_dedicated_to_a_repository_refuses_another_repositorys_job(
    tmp_path: Path
) -> None:
    dedicated = {"REPRO_GATE_HOOK_REPOSITORY": "octo-org/trainer"}
    other, github_env = run_hook(tmp_path, SLOT_UUIDS[0], GITHUB_REPOSITORY="octo-org/fork",
                                 **dedicated)
    assert other.returncode == 1 and github_env == "EARLIER=1\n"
    assert other.stderr == ("repro-gate hook: refusing the job: this runner serves"
                            " octo-org/trainer only, not 'octo-org/fork'\n")
    own, github_env = run_hook(tmp_path, SLOT_UUIDS[0], GITHUB_REPOSITORY="octo-org/trainer",
                               **dedicated)
    assert own.returncode == 0, own.stderr
    assert github_env == f"EARLIER=1\nREPRO_GATE_GPUS={SLOT_UUIDS[0]}\n"


def test_a_mig_slot_is_judged_by_its_gpu() -> None:
    raw = {"devices": [{**HEALTHY, "mig_uuids": [MIG.encode()], "ecc_uncorrected_volatile": 1}]}
    assert CHECK.judge(raw, MIG) == (
        f"GPU {MIG} has 1 uncorrectable ECC errors since the driver loaded")


def test_the_two_sides_agree_on_the_variable(tmp_path: Path) -> None:
    assert hook.SLOT_VARIABLE == CHECK.SLOT_VARIABLE
    old_umask = os.umask(0o077)
    try:
        installed = hook.install(tmp_path / "hooks")
    finally:
        os.umask(old_umask)
    assert os.access(installed.script, os.X_OK)
    # Whatever the service's umask, the runner's user can enter the folder and read the check.
    assert [oct(p.stat().st_mode & 0o777) for p in (tmp_path / "hooks", installed.check)] == [
        "0o755", "0o644"]
    assert hook.STATUS_VARIABLE == CHECK.STATUS_VARIABLE
    assert hook.ALLOW_NO_GPU_VARIABLE == CHECK.ALLOW_NO_GPU_VARIABLE
    assert hook.REPOSITORY_VARIABLE == CHECK.REPOSITORY_VARIABLE
    service = {
        "ACTIONS_RUNNER_HOOK_JOB_STARTED": "/opt/repro-gate/hooks/repro-gate-job-started.sh",
        "REPRO_GATE_SLOT_UUID": MIG,
        "REPRO_GATE_HOOK_STATUS": "/opt/repro-gate/status/hook-status.json"}
    assert hook.runner_environment(Slot(0, MIG, "x")) == service
    assert hook.runner_environment(Slot(0, MIG, "x"), allow_no_gpu=True) == {
        **service, "REPRO_GATE_HOOK_ALLOW_NO_GPU": "1"}
    assert hook.runner_environment(Slot(0, MIG, "x"), repository="octo-org/trainer") == {
        **service, "REPRO_GATE_HOOK_REPOSITORY": "octo-org/trainer"}


@pytest.mark.skipif(not NVML_ANSWERS, reason="needs a GPU whose driver NVML reaches")
def test_on_this_gpu(tmp_path: Path) -> None:
    raw = CHECK.read_nvml()
    uuid = raw["devices"][0]["uuid"]
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    result, github_env = run_hook(tmp_path, uuid, smi=False)
    assert result.returncode == 0, result.stderr
    assert github_env.endswith(f"REPRO_GATE_GPUS={uuid}\n")
    refused, _ = run_hook(tmp_path, "GPU-00000000-0000-4000-8000-000000000000", smi=False)
    assert refused.returncode == 1 and "is not visible in this runner" in refused.stderr


# The status file the service polls: the hook's outcome, as the service reads it.
@needs_no_nvml
def test_an_accepted_job_leaves_its_status(tmp_path: Path) -> None:
    result, _ = run_hook(tmp_path, MIG)
    assert result.returncode == 0, result.stderr
    assert hook.read_status(status_dir(tmp_path)) == hook.HookStatus(
        hook.HookOutcome.ACCEPTED, MIG)
    assert [p.name for p in status_dir(tmp_path).iterdir()] == [hook.STATUS_FILE]  # no temp file


@needs_no_nvml
def test_a_refused_job_leaves_its_reason(tmp_path: Path) -> None:
    result, _ = run_hook(tmp_path, SLOT_UUIDS[1])
    assert result.returncode == 1
    status = hook.read_status(status_dir(tmp_path))
    assert status is not None and status.outcome is hook.HookOutcome.REFUSED
    assert result.stderr == f"repro-gate hook: refusing the job: {status.detail}\n"
    assert status.detail.startswith(f"GPU {SLOT_UUIDS[1]} is not visible in this runner")


@pytest.mark.parametrize("uuid", [pytest.param(SLOT_UUIDS[0], marks=needs_no_nvml),
                                  "not-a-uuid"])
def test_a_status_that_cannot_be_written_keeps_the_hook_exit_code(tmp_path: Path, uuid: str
                                                                   ) -> None:
    """Accepted (with the allow flag where no GPU tool answers) and refused alike."""
    nowhere = tmp_path / "missing" / hook.STATUS_FILE
    result, github_env = run_hook(tmp_path, uuid, smi=False, REPRO_GATE_HOOK_ALLOW_NO_GPU="1",
                                  REPRO_GATE_HOOK_STATUS=str(nowhere))
    accepted = uuid != "not-a-uuid"
    assert result.returncode == (0 if accepted else 1), result.stderr
    assert github_env.endswith(f"REPRO_GATE_GPUS={uuid}\n") == accepted
    assert f"repro-gate hook: cannot write the status file {nowhere}: " in result.stderr
    assert not nowhere.parent.exists()


def test_without_the_variable_no_status_is_written(tmp_path: Path) -> None:
    result, _ = run_hook(tmp_path, "not-a-uuid", REPRO_GATE_HOOK_STATUS="")
    assert result.returncode == 1 and "status file" not in result.stderr
    assert hook.read_status(status_dir(tmp_path)) is None


@pytest.mark.parametrize("content", [
    b"{", b"[]", b'"accepted"', b'{"outcome": "maybe", "uuid": "GPU-1"}',
    b'{"outcome": "accepted"}', b'{"outcome": "refused", "reason": 3}', b"\xff\xfe"])
def test_a_garbled_status_is_a_refusal(tmp_path: Path, content: bytes) -> None:
    (tmp_path / hook.STATUS_FILE).write_bytes(content)
    assert hook.read_status(tmp_path) == hook.HookStatus(hook.HookOutcome.REFUSED, "unreadable")


def test_a_refusal_reads_back_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / hook.STATUS_FILE).write_text('{"outcome": "refused", "reason": "too hot"}')
    assert hook.read_status(tmp_path) == hook.HookStatus(hook.HookOutcome.REFUSED, "too hot")
    assert hook.read_status(tmp_path / "elsewhere") is None
