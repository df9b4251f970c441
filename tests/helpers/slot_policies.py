"""Request bodies and slot policies for the tests of the per-slot Docker API filter: a slot's
policy on a work folder, GPU device requests, host configs, and the runner's socket mount."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.runner.proxy.policy import SlotPolicy

SLOT_GPU = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_GPU = "GPU-99999999-8888-7777-6666-555555555555"
CID = "0123456789abcdef" * 4  # a full container ID
RUNNER_SOCKET = "/var/run/docker.sock"  # where the runner container sees its slot's socket


def policy_for(work: Path, **changes: Any) -> SlotPolicy:
    return SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=work, **changes)


def socket_policy(root: Path) -> SlotPolicy:
    """A slot whose proxy socket lies beside its work folder, as the service lays them out."""
    (root / "work" / "data").mkdir(parents=True)
    proxy = root / "proxy" / "docker.sock"
    return policy_for(root / "work", protected=frozenset({proxy}), proxy_socket=proxy)


def gpu(ids: list[str] | None = None, count: int = 0) -> dict[str, Any]:
    return {"Driver": "", "Count": count, "DeviceIDs": ids, "Capabilities": [["gpu"]]}


def host(**settings: Any) -> dict[str, Any]:
    return {"Image": "python", "HostConfig": settings}


def socket_mount(source: str, **more: Any) -> dict[str, Any]:
    return {"Type": "bind", "Source": source, "Target": RUNNER_SOCKET, **more}


def with_paths(body: dict[str, Any], work: Path, proxy: Path) -> dict[str, Any]:
    """`body` with `{work}` and `{proxy}` replaced by the slot's folders."""
    return json.loads(json.dumps(body).replace("{work}", str(work)).replace("{proxy}", str(proxy)))
