"""Devices: a privileged container, and GPUs the slot must not get (by UUID, `all`, a count,
or the other GPU's device node).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from repro_gate.runner.audit.engine import Finding, Outcome
from repro_gate.runner.audit.steps import Context, cat, run_output

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
CAP_SYS_ADMIN = 21
HOST_ROOT_MAP = re.compile(r"^\s*0\s+0\s+4294967295\s*$", re.MULTILINE)


def privileged(ctx: Context) -> Finding:
    """Privileged: the host's root with every capability, or only a user namespace's."""
    output = run_output(ctx, {"Privileged": True},
                        f"{cat('/proc/self/uid_map')}; {cat('/proc/self/status')}")
    text = output.decode("utf-8", "replace")
    found = re.search(r"^CapEff:\s*([0-9a-f]+)", text, re.MULTILINE)
    admin = bool(found and int(found.group(1), 16) >> CAP_SYS_ADMIN & 1)
    if admin and HOST_ROOT_MAP.search(text):
        return Finding(Outcome.ESCAPED, "ran as the host's root with CAP_SYS_ADMIN")
    return Finding(Outcome.NO_EFFECT, "ran, but not as the host's root")


def _gpu_request(ctx: Context, request: dict[str, Any]) -> Finding:
    device = {"Driver": "nvidia", "Capabilities": [["gpu"]], **request}
    output = run_output(ctx, {"DeviceRequests": [device]}, "export -p").decode()
    found = re.search(r"NVIDIA_VISIBLE_DEVICES='?([^'\n]*)", output)
    granted = found.group(1) if found else ""
    if granted and granted not in ("void", "none", ctx.target.gpu_uuid):
        return Finding(Outcome.ESCAPED, f"started with NVIDIA_VISIBLE_DEVICES={granted}")
    return Finding(Outcome.NO_EFFECT, f"started with NVIDIA_VISIBLE_DEVICES={granted!r}")


def other_gpu_by_uuid(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"DeviceIDs": [ctx.target.other_gpu_uuid]})


def all_gpus(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"DeviceIDs": ["all"]})


def gpu_count_all(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"Count": -1})


def device_node(uuid: str) -> Path | None:
    """The /dev/nvidiaN of the GPU `uuid` on this host, from the NVIDIA driver's /proc files."""
    for information in sorted(NVIDIA_PROC.glob("*/information")):
        text = information.read_text(encoding="utf-8", errors="replace")
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.MULTILINE)
        if uuid in text and minor:
            return Path(f"/dev/nvidia{minor.group(1)}")
    return None


def other_gpu_device(ctx: Context) -> Finding:
    node = device_node(ctx.target.other_gpu_uuid)
    if node is None:
        return Finding(Outcome.NOT_RUN, "no NVIDIA device node of the other GPU on this host")
    devices = [{"PathOnHost": str(node), "PathInContainer": str(node),
                "CgroupPermissions": "rw"}]
    output = run_output(ctx, {"Devices": devices}, f"[ -c {node} ] && echo present")
    if b"present" in output:
        return Finding(Outcome.ESCAPED, f"{node} is in the container")
    return Finding(Outcome.NO_EFFECT, f"{node} is not in the container")
