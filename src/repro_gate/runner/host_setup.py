"""`repro-gate runner setup`: prepare the host for rootless slots, idempotently.

For each slot: its user (a system user with no login), its subordinate user and group IDs,
its folders (slot_folders.py) and its GPU's device node (group the slot's, mode 0660, so no
other slot's engine can open it). For the host: the tools the engine needs, and /dev/net/tun
usable by unprivileged users (slirp4netns, the engine's network, opens it in the slot's own
network namespace). Every change is said in one line; a second run changes nothing.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from repro_gate.errors import ConfigError, ErrorKind, GateError
from repro_gate.runner.runner_config import EngineKind, RunnerConfig
from repro_gate.runner.slot_engine import check_socket_paths, launcher
from repro_gate.runner.slot_folders import SlotFolders
from repro_gate.runner.slot_identity import SlotIdentity
from repro_gate.runner.slots import Slot, read_devices

TOOLS = {"rootlesskit": "rootlesskit", "slirp4netns": "slirp4netns", "newuidmap": "uidmap",
         "newgidmap": "uidmap", "useradd": "passwd", "usermod": "passwd"}
TUN = Path("/dev/net/tun")
TUN_MODE = 0o666  # the kernel's own default for the tun device
GPU_NODE_MODE = 0o660
SUBORDINATE_FILES = {"uid": Path("/etc/subuid"), "gid": Path("/etc/subgid")}
NOLOGIN = "/usr/sbin/nologin"

Say = Callable[[str], None]


def set_up(config: RunnerConfig, slots: list[Slot], say: Say) -> int:
    """Bring the host to what the slots need; the number of changes made."""
    if os.geteuid() != 0:
        raise GateError("runner setup: must run as root (it creates users and sets owners)",
                        kind=ErrorKind.CONFIG)
    if config.isolation.engine is EngineKind.SHARED:
        say("isolation.engine is shared: no slot users to set up")
        return 0
    _check_tools(config)
    _check_passable(config.work_root)
    changes = _tun()
    minors = _gpu_minors(config)
    for slot in slots:
        changes += _slot(config, slot, minors)
    for change in changes:
        say(change)
    if not changes:
        say("nothing to change")
    return len(changes)


def _check_tools(config: RunnerConfig) -> None:
    launcher(config)
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise ConfigError(f"runner setup: missing tools (Debian: apt install {' '.join(missing)})")


def _check_passable(work_root: Path) -> None:
    """Each slot's engine runs as its own user, who must pass every folder above work_root."""
    for parent in work_root.parents:
        if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
            raise ConfigError(f"work_root {work_root}: {parent} is closed to other users (mode"
                              f" {stat.S_IMODE(parent.stat().st_mode):04o}), so the slots' users"
                              " cannot reach their folders: choose a work_root under folders"
                              " anyone may pass (mode 0711 or 0755)")


def _tun() -> list[str]:
    if not TUN.exists():
        raise GateError(f"runner setup: {TUN} does not exist: the slot engines' network"
                        " (slirp4netns) needs the tun module (modprobe tun)",
                        kind=ErrorKind.CONFIG)
    mode = stat.S_IMODE(TUN.stat().st_mode)
    if mode & TUN_MODE == TUN_MODE:
        return []
    TUN.chmod(TUN_MODE)
    return [f"{TUN}: mode {mode:04o} -> {TUN_MODE:04o} (unprivileged users may open it; each"
            " opens devices of its own network namespace only)"]


def _slot(config: RunnerConfig, slot: Slot, minors: dict[str, int]) -> list[str]:
    identity = SlotIdentity.of(config, slot)
    folders = SlotFolders.under(config.work_root, slot)
    check_socket_paths(folders)
    for path in SUBORDINATE_FILES.values():
        _check_free(identity, path)  # before anything is made
    changes = _user(identity, folders)
    changes += _subordinate_ids(identity)
    owner = identity.owner()
    changes += folders.create(owner)
    # MIG instances of one GPU share its node: they are told apart by NVIDIA's capability
    # files, which the hook mounts, not by the node's group.
    node = None if slot.parent_uuid else _gpu_node(slot, minors, config)
    if node is not None:
        changes += _own_node(node, owner.gid)
    return changes


def _user(identity: SlotIdentity, folders: SlotFolders) -> list[str]:
    try:
        identity.owner()
        return []
    except ConfigError:
        pass
    _run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
          str(folders.engine), "--shell", NOLOGIN, identity.user])
    return [f"created user {identity.user}"]


def _subordinate_ids(identity: SlotIdentity) -> list[str]:
    wanted = (identity.subordinate_first, identity.subordinate_count)
    changes = []
    for kind, path in SUBORDINATE_FILES.items():
        if wanted in _ranges(path).get(identity.user, []):
            continue
        option = "--add-subuids" if kind == "uid" else "--add-subgids"
        _run(["usermod", option,
              f"{identity.subordinate_first}-{identity.subordinate_last}", identity.user])
        changes.append(f"{path}: {identity.user} gets {identity.subordinate_first}-"
                       f"{identity.subordinate_last}")
    return changes


def _check_free(identity: SlotIdentity, path: Path) -> None:
    """No other user's subordinate range overlaps the slot's."""
    wanted = (identity.subordinate_first, identity.subordinate_count)
    for user, owned in _ranges(path).items():
        for first, count in owned:
            if user != identity.user and _overlap(wanted, (first, count)):
                raise ConfigError(
                    f"runner setup: {path}: {user} already has {first}-{first + count - 1},"
                    f" which overlaps slot user {identity.user}'s"
                    f" {identity.subordinate_first}-{identity.subordinate_last}"
                    " (set isolation.subordinate_id_base)")


def _ranges(path: Path) -> dict[str, list[tuple[int, int]]]:
    """`user:first:count` lines (numeric owners as written)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            ranges.setdefault(parts[0], []).append((int(parts[1]), int(parts[2])))
    return ranges


def _overlap(one: tuple[int, int], other: tuple[int, int]) -> bool:
    return one[0] < other[0] + other[1] and other[0] < one[0] + one[1]


def _gpu_minors(config: RunnerConfig) -> dict[str, int]:
    """GPU UUID -> the N of /dev/nvidiaN, from NVML; {} where NVML is absent."""
    raw = read_devices()
    minors = {}
    for device in raw.get("devices") or []:
        uuid, minor = device.get("uuid"), device.get("minor")
        if isinstance(uuid, str) and isinstance(minor, int):
            minors[uuid] = minor
    if "error" in raw and not config.health.allow_no_gpu:
        raise ConfigError(f"runner setup: cannot find the slots' GPU device nodes: {raw['error']}"
                          " (or set health.allow_no_gpu for slots without a GPU)")
    return minors


def _gpu_node(slot: Slot, minors: dict[str, int], config: RunnerConfig) -> Path | None:
    if slot.uuid in minors:
        return Path(f"/dev/nvidia{minors[slot.uuid]}")
    if config.health.allow_no_gpu:
        return None
    raise ConfigError(f"runner setup: slot {slot.index}: NVML does not list GPU {slot.uuid}")


def _own_node(node: Path, gid: int) -> list[str]:
    """The slot's group, 0660: another slot's engine (another user and group) cannot open it."""
    status = node.stat()
    changes = []
    if status.st_gid != gid:
        os.chown(node, 0, gid)
        changes.append(f"{node}: group set to {gid}")
    if stat.S_IMODE(status.st_mode) != GPU_NODE_MODE:
        node.chmod(GPU_NODE_MODE)
        changes.append(f"{node}: mode set to {GPU_NODE_MODE:04o}")
    return changes


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise GateError(f"runner setup: {' '.join(command)}: {detail}", kind=ErrorKind.CONFIG)
