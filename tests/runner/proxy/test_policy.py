"""The per-slot proxy's rules on request bodies: each refusal with its reason, what jobs need
passing, host paths judged where they really lead, and the runner's own socket path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.slot_policies import (
    OTHER_GPU,
    RUNNER_SOCKET,
    SLOT_GPU,
    gpu,
    host,
    policy_for,
    socket_mount,
    with_paths,
)

from repro_gate.runner.proxy.policy import (
    SlotPolicy,
    check_create,
    check_exec,
    check_network_create,
    check_update,
    check_volume_create,
)

# (create body, a part of the refusal); the paths are relative to the work folder's parent.
REFUSED = [
    (host(Privileged=True), "Privileged is refused"),
    (host(DeviceRequests=[gpu([OTHER_GPU])]), f"DeviceIDs ['{OTHER_GPU}'] is refused"),
    (host(DeviceRequests=[gpu([SLOT_GPU, OTHER_GPU])]), "this slot may use only"),
    (host(DeviceRequests=[gpu(count=-1)]), "Count -1 is refused"),
    (host(DeviceRequests=[gpu(count=1)]), "Count 1 is refused"),
    (host(DeviceRequests=[{**gpu([SLOT_GPU]), "Driver": "cdi"}]), "driver 'cdi' is refused"),
    (host(Devices=[{"PathOnHost": "/dev/nvidia1"}]), "HostConfig.Devices is refused"),
    (host(DeviceCgroupRules=["c 195:* rmw"]), "DeviceCgroupRules is refused"),
    (host(Binds=["/etc:/host-etc:ro"]), "bind '/etc' is refused"),
    (host(Binds=["{work}/../outside:/x"]), "is refused: only paths inside"),
    (host(Mounts=[{"Type": "bind", "Source": "/", "Target": "/host"}]), "bind mount '/'"),
    (host(Mounts=[{"Type": "volume", "Target": "/v", "VolumeOptions": {"DriverConfig": {
        "Options": {"type": "none", "o": "bind", "device": "/etc"}}}}]), "volume mount device"),
    (host(Mounts=[{"Type": "npipe", "Target": "/p"}]), "mount type 'npipe' is refused"),
    (host(VolumeDriver="sshfs"), "VolumeDriver 'sshfs' is refused"),
    (host(CapAdd=["SYS_ADMIN"]), "CapAdd 'SYS_ADMIN' is refused (allowed: none)"),
    (host(NetworkMode="host"), "NetworkMode 'host' is refused"),
    (host(PidMode="host"), "PidMode 'host' is refused"),
    (host(IpcMode="host"), "IpcMode 'host' is refused"),
    (host(UsernsMode="host"), "UsernsMode 'host' is refused"),
    ({"Image": "python", "NetworkingConfig": {"EndpointsConfig": {"Host": {}}}},
     "EndpointsConfig 'host' is refused"),
    (host(SecurityOpt=["seccomp=unconfined"]), "'seccomp=unconfined' is refused"),
    (host(SecurityOpt=["apparmor:unconfined"]), "'apparmor:unconfined' is refused"),
    (host(SecurityOpt=["label=disable"]), "'label=disable' is refused"),
    (host(MaskedPaths=[]), "MaskedPaths is refused"),
    (host(Runtime="nvidia"), "Runtime 'nvidia' is refused"),
    (host(CgroupParent="/"), "CgroupParent is refused"),
    (host(LogConfig={"Type": "syslog", "Config": {"syslog-address": "tcp://127.0.0.1:1"}}),
     "LogConfig.Type 'syslog' is refused"),
    (host(SecurityOpt=["disable"]), "'disable' is refused"),
    ({"Image": "python", "Env": ["NVIDIA_VISIBLE_DEVICES=all"]}, "NVIDIA_VISIBLE_DEVICES='all'"),
    # Docker 20.10 reads keys ignoring case, and host settings from the top level too.
    ({"Image": "python", "hostconfig": {"privileged": True}}, "Privileged is refused"),
    ({"Image": "python", "HostConfig": {"DeviceReque\u017fts": [gpu([OTHER_GPU])]}}, "DeviceIDs"),
    ({"Image": "python", "Privileged": True}, "Privileged is refused"),
    ({"Image": "python", "Binds": ["/etc:/x"]}, "bind '/etc' is refused"),
    ({"Image": "python", "HostConfig": {"Privileged": False, "privileged": True}},
     "keys equal but for case are refused: 'privileged'"),
]

PASSED = [
    {"Image": "python"},
    host(DeviceRequests=[gpu([SLOT_GPU])]),
    host(DeviceRequests=[{**gpu([SLOT_GPU]), "Driver": "nvidia"}]),
    host(Binds=["{work}/data:/data:ro", "named-volume:/cache"]),
    host(Mounts=[{"Type": "bind", "Source": "{work}", "Target": "/w"},
                 {"Type": "tmpfs", "Target": "/tmp"}, {"Type": "volume", "Target": "/v"}]),
    host(CapDrop=["ALL"], SecurityOpt=["no-new-privileges:true", "seccomp=builtin"],
         NetworkMode="none", Runtime="runc"),
    {"Image": "python", "Env": [f"NVIDIA_VISIBLE_DEVICES={SLOT_GPU}", "A=b"]},
]


def with_work(body: dict[str, Any], work: Path) -> dict[str, Any]:
    return json.loads(json.dumps(body).replace("{work}", str(work)))


@pytest.mark.parametrize(("body", "reason"), REFUSED)
def test_check_create_refuses_each_rule_with_its_reason(
    body: dict[str, Any], reason: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    refused = check_create(with_work(body, work), policy_for(work))

    assert refused is not None and reason in refused, refused


@pytest.mark.parametrize("body", PASSED)
def test_check_create_passes_what_jobs_need(body: dict[str, Any], tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)

    assert check_create(with_work(body, work), policy_for(work)) is None


def test_a_symbolic_link_out_of_the_work_folder_and_the_slot_socket_are_refused(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "escape").symlink_to("/etc")
    policy = policy_for(work, protected=frozenset({work / "run" / "docker.sock"}))

    escape = check_create(host(Binds=[f"{work}/escape:/x"]), policy)
    socket_dir = check_create(host(Binds=[f"{work}/run:/x"]), policy)
    allowed = check_create(host(CapAdd=["CAP_SYS_PTRACE"]),
                           policy_for(work, allowed_capabilities=frozenset({"SYS_PTRACE"})))

    assert escape is not None and f"bind '{work}/escape' is refused" in escape
    assert socket_dir is not None and "holds the slot's Docker socket" in socket_dir
    assert allowed is None







SOCKET_REFUSED = [
    (host(Binds=[f"{RUNNER_SOCKET}/../x:/x"]), f"bind '{RUNNER_SOCKET}/../x' is refused"),
    (host(Binds=["/var/run/../run/docker.sock:/s"]), "is refused: only paths inside"),
    (host(Binds=["//var/run/docker.sock:/s"]), "is refused: only paths inside"),
    (host(Binds=["/var/run/./docker.sock:/s:ro"]), "is refused: only paths inside"),
    (host(Mounts=[socket_mount(f"{RUNNER_SOCKET}/")]), "bind mount '/var/run/docker.sock/'"),
    (host(Binds=["{proxy}:/s"]), "is refused: only paths inside"),  # its host path: no
    (host(Mounts=[{"Type": "volume", "Target": "/s", "VolumeOptions": {"DriverConfig": {
        "Options": {"type": "none", "o": "bind", "device": RUNNER_SOCKET}}}}]),
     "volume mount device '/var/run/docker.sock' is refused"),
]








@pytest.mark.parametrize(("body", "reason"), SOCKET_REFUSED)
def test_any_other_path_to_a_docker_socket_stays_refused(
    body: dict[str, Any], reason: str, socket_policy: SlotPolicy
) -> None:
    assert socket_policy.proxy_socket is not None
    body = with_paths(body, socket_policy.work_folder, socket_policy.proxy_socket)

    refused = check_create(body, socket_policy)

    assert refused is not None and reason in refused, refused


def test_without_a_proxy_socket_the_runners_socket_path_is_refused(tmp_path: Path) -> None:
    # A policy that serve() has not completed names no socket to rewrite to.
    refused = check_create(host(Binds=[f"{RUNNER_SOCKET}:{RUNNER_SOCKET}"]), policy_for(tmp_path))

    assert refused is not None and f"bind '{RUNNER_SOCKET}' is refused" in refused


@pytest.mark.parametrize(("check", "body", "reason"), [
    (check_update, {"Memory": 1 << 30, "CpuShares": 2048, "PidsLimit": -1}, None),
    (check_update, {"DeviceRequests": [gpu([OTHER_GPU])]}, "DeviceIDs"),
    (check_update, {"devices": [{"PathOnHost": "/dev/nvidia1"}]}, "HostConfig.Devices"),
    (check_exec, {"Cmd": ["nvidia-smi"], "User": "root"}, None),
    (check_exec, {"Cmd": ["sh"], "Privileged": True}, "Privileged is refused"),
    (check_volume_create, {"Name": "cache"}, None),
    (check_volume_create, {"DriverOpts": {"type": "tmpfs", "device": "tmpfs"}}, None),
    (check_volume_create, {"DriverOpts": {"type": "none", "o": "bind", "device": "/"}},
     "volume device '/' is refused"),
    (check_volume_create, {"DriverOpts": {"type": "ext4", "device": "/dev/sda1"}},
     "a volume on device '/dev/sda1' (type 'ext4') is refused"),
    (check_volume_create, {"Driver": "rexray"}, "volume driver 'rexray' is refused"),
    (check_network_create, {"Name": "job", "Driver": "bridge"}, None),
    (check_network_create, {"Name": "lan", "Driver": "macvlan"}, "driver 'macvlan' is refused"),
])
def test_the_other_bodies_follow_the_same_rules(
    check: Any, body: dict[str, Any], reason: str | None, tmp_path: Path
) -> None:
    refused = check(body, policy_for(tmp_path))

    assert refused == reason or (reason is not None and refused and reason in refused), refused
