"""runner.yml through `repro-gate runner check-config`, and slots from recorded NVML values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.runner_files import SLOT_UUIDS, repro_gate, token_file, write_config

from repro_gate.config.overrides import from_action_inputs
from repro_gate.errors import ConfigError
from repro_gate.runner import runner_config
from repro_gate.runner.runner_config import (
    SlotSettings,
    SlotSource,
    TargetKind,
    TokenFileAuth,
    load_runner_config,
)
from repro_gate.runner.slots import Slot, read_devices, slots_from_raw

A100_UUID = "GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
MIG_1 = "MIG-11111111-2222-4333-8444-555555555555"
MIG_2 = "MIG-66666666-7777-4888-8999-aaaaaaaaaaaa"

# `slots.read_devices()` on two real machines, as pynvml returns the values: str or bytes,
# (current, pending) MIG modes, and NVMLError texts where a query is not supported.
RAW_TWO_H100 = {"devices": [
    {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": SLOT_UUIDS[1], "mig_mode": [0, 0],
     "mig_devices": []},
    {"index": 1, "name": b"NVIDIA H100 80GB HBM3", "uuid": SLOT_UUIDS[0].encode(),
     "mig_mode": [0, 0], "mig_devices": []},
]}
RAW_A100_MIG_AND_A10G = {"devices": [
    {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "uuid": A100_UUID, "mig_mode": [1, 1],
     "mig_devices": [{"name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": MIG_1},
                     {"name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": MIG_2}]},
    {"index": 1, "name": "NVIDIA A10G", "uuid": "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
     "mig_mode": {"error": "Not Supported"}, "mig_devices": {"error": "Not Supported"}},
]}
RAW_NO_DRIVER = {"error": "NVML is not available: NVML Shared Library Not Found"}


def good_github(folder: Path) -> dict:
    return {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}


def test_check_config_prints_the_slots_and_the_target(tmp_path: Path) -> None:
    github = {**good_github(tmp_path), "labels": ["h100-pool"], "api_url": "https://ghe.example/api/v3"}
    path = write_config(tmp_path, github)
    result = repro_gate("runner", "check-config", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == ("target: repository octo-org/trainer at https://ghe.example/api/v3,"
                        f" runner group 1, auth: token file {tmp_path / 'token'}")
    assert lines[3] == "isolation: a rootless engine per slot, under the slot's own user"
    assert lines[4:] == [
        f"slot {i}: {uuid} NVIDIA H100 80GB HBM3 -> repro-gate-gpuhost-slot{i}"
        " [self-hosted, gpu, nvidia-h100-80gb-hbm3, repro-gate, h100-pool],"
        f" user repro-gate-slot{i}, subordinate IDs {1_000_000_000 + i * 65536}-"
        f"{1_000_000_000 + (i + 1) * 65536 - 1}"
        for i, uuid in enumerate(SLOT_UUIDS)]


def test_defaults_and_paths_relative_to_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = write_config(folder, {"organization": "octo-org",
                                 "auth": {"token_file": token_file(folder).name}})
    effective = load_runner_config(path)
    assert effective.github.target.kind is TargetKind.ORGANIZATION
    assert effective.github.target.api_path("/7") == "/orgs/octo-org/actions/runners/7"
    assert effective.github.api_url == runner_config.DEFAULT_API_URL
    assert effective.github.runner_group_id == runner_config.DEFAULT_RUNNER_GROUP_ID
    assert effective.name_prefix == runner_config.DEFAULT_NAME_PREFIX
    assert effective.github.auth == TokenFileAuth(folder.resolve() / "token")
    assert effective.work_root == Path(runner_config.DEFAULT_WORK_ROOT)
    assert effective.isolation == runner_config.IsolationSettings(
        engine=runner_config.EngineKind.ROOTLESS, user_prefix=None,
        subordinate_id_base=runner_config.DEFAULT_SUBORDINATE_ID_BASE, engine_command=None)
    assert effective.slots.uuids == tuple(SLOT_UUIDS)
    assert effective.runner.command == runner_config.DEFAULT_RUNNER_COMMAND
    assert effective.runner.crash_loop_limit == runner_config.DEFAULT_CRASH_LOOP_LIMIT
    assert effective.health.allow_no_gpu is False
    assert effective.metrics_listen == runner_config.DEFAULT_METRICS_LISTEN
    assert effective.docker_url == runner_config.DEFAULT_DOCKER_URL


def test_runner_health_and_proxy_settings(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, good_github(tmp_path),
        runner={"image": "sha256:" + "a" * 64, "environment": {"HTTPS_PROXY": "http://p:3128",
                                                               "RUNNER_DEBUG": 1}},
        health={"allow_no_gpu": True, "leftover_process_wait_seconds": 5},
        allowed_capabilities=["sys_ptrace"], metrics={"listen": None}, pool="h100")
    effective = load_runner_config(path)
    assert effective.runner.environment == (("HTTPS_PROXY", "http://p:3128"), ("RUNNER_DEBUG", "1"))
    assert effective.health.leftover_process_wait == 5.0 and effective.health.allow_no_gpu
    assert effective.allowed_capabilities == frozenset({"SYS_PTRACE"})
    assert effective.metrics_listen is None and effective.pool == "h100"


def test_a_slot_dedicated_to_one_repository(tmp_path: Path) -> None:
    path = write_config(tmp_path, good_github(tmp_path),
                        isolation={"dedicated_repository": "octo-org/trainer"})

    assert load_runner_config(path).isolation.dedicated_repository == "octo-org/trainer"
    document = yaml.safe_load(path.read_text())
    document["isolation"]["dedicated_repository"] = "trainer"
    path.write_text(yaml.safe_dump(document))
    result = repro_gate("runner", "check-config", "--config", "runner.yml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("repro-gate: error: runner.yml:"
                                    " isolation.dedicated_repository: ")


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(pools=2),
     "runner.yml: (top level): unknown key 'pools' (did you mean 'pool'?)"),
    (lambda d: d["github"].update(organization="octo-org"),
     "runner.yml: github: must be a mapping with exactly one of repository or organization"),
    (lambda d: d["github"]["auth"].update(token="ghp_secret"),
     "runner.yml: github.auth.token: a secret is never written in runner.yml: put it in a file"
     " and name it in github.auth.token_file (or use github.auth.app)"),
    (lambda d: d["github"]["auth"].update(token_file="missing-token"),
     "runner.yml: github.auth.token_file: {dir}/missing-token not found"),
    (lambda d: d["slots"].update(source="gpus"),
     "runner.yml: slots.uuids: only used with slots.source 'uuids'"),
    (lambda d: d["slots"].pop("uuids"),
     "runner.yml: slots.uuids: is required when slots.source is 'uuids'"),
    (lambda d: d["slots"].update(uuids=["0"]),
     "runner.yml: slots.uuids[0]: must be a GPU-... or MIG-... UUID"),
    (lambda d: d["runner"].update(image="ghcr.io/actions/actions-runner:2.330.0"),
     "runner.yml: runner.image: must be an image pinned by digest, NAME@sha256:<64 hex>"),
    (lambda d: d.pop("runner"), "runner.yml: runner: is required"),
    (lambda d: d.update(metrics={"listen": "9466"}),
     "runner.yml: metrics.listen: must be HOST:PORT"),
])
def test_a_bad_runner_yml_is_one_line_and_exit_2(tmp_path: Path, change, message) -> None:
    path = write_config(tmp_path, good_github(tmp_path))
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document))
    result = repro_gate("runner", "check-config", "--config", "runner.yml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"repro-gate: error: {message.format(dir=tmp_path.resolve())}\n"


def test_a_token_on_the_command_line_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, good_github(tmp_path))
    result = repro_gate("runner", "register-once", "--config", str(path), "--slot", "0",
                        "--token", "ghp_secret", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("repro-gate: error: --token: a token is never taken on the"
                                    " command line")
    assert result.stderr.count("\n") == 1 and "ghp_secret" not in result.stderr


def test_gpu_discovery_without_a_driver_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^slots: cannot discover GPUs: NVML is not available"):
        slots_from_raw(RAW_NO_DRIVER, SlotSettings(SlotSource.GPUS))


def test_one_slot_per_gpu() -> None:
    assert slots_from_raw(RAW_TWO_H100, SlotSettings()) == [
        Slot(0, SLOT_UUIDS[1], "NVIDIA H100 80GB HBM3"),
        Slot(1, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3"),
    ]


def test_one_slot_per_mig_instance_and_whole_gpus_otherwise() -> None:
    slots = slots_from_raw(RAW_A100_MIG_AND_A10G, SlotSettings(SlotSource.MIG))
    assert [(s.uuid, s.model, s.parent_uuid) for s in slots] == [
        (MIG_1, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100_UUID),
        (MIG_2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100_UUID),
        ("GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "NVIDIA A10G", None),
    ]
    # Without `mig`, a GPU in MIG mode is still one slot.
    assert len(slots_from_raw(RAW_A100_MIG_AND_A10G, SlotSettings(SlotSource.GPUS))) == 2


def test_listed_uuids_take_the_model_from_nvml_else_from_the_file() -> None:
    listed = SlotSettings(SlotSource.UUIDS, (MIG_2, SLOT_UUIDS[0]), model="NVIDIA H100")
    assert slots_from_raw(RAW_A100_MIG_AND_A10G, listed) == [
        Slot(0, MIG_2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", A100_UUID),
        Slot(1, SLOT_UUIDS[0], "NVIDIA H100"),
    ]
    assert slots_from_raw(RAW_NO_DRIVER, listed)[0].model == "NVIDIA H100"
    unnamed = SlotSettings(SlotSource.UUIDS, (SLOT_UUIDS[0],))
    assert slots_from_raw(RAW_NO_DRIVER, unnamed)[0].model == runner_config.DEFAULT_GPU_MODEL


def test_the_action_takes_the_slot_gpu_unless_the_gpus_input_is_set() -> None:
    slot = {"REPRO_GATE_GPUS": SLOT_UUIDS[0]}
    assert from_action_inputs(slot)["gpus"] == [SLOT_UUIDS[0]]
    assert from_action_inputs({**slot, "INPUT_GPUS": "none"})["gpus"] == "none"
    assert "gpus" not in from_action_inputs({"REPRO_GATE_GPUS": " "})


def test_discovering_gpus_without_a_driver_is_one_line(tmp_path: Path) -> None:
    if "error" not in read_devices():
        pytest.skip("NVML answers here")
    path = write_config(tmp_path, good_github(tmp_path))
    document = yaml.safe_load(path.read_text())
    document["slots"] = {"source": "mig"}
    path.write_text(yaml.safe_dump(document))
    result = repro_gate("runner", "check-config", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("repro-gate: error: slots: cannot discover GPUs: ")
    assert result.stderr.endswith("(list them by UUID with slots.source: uuids, or fix the"
                                  " driver)\n") and result.stderr.count("\n") == 1
