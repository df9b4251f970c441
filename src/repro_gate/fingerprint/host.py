"""Host-side facts, collected once before the runs: git, lockfiles, data hashes, CPU, NVML."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from repro_gate.fingerprint.code import collect_code, repository_root
from repro_gate.fingerprint.data import data_label, hash_data
from repro_gate.fingerprint.hardware import collect_cpu, collect_gpus
from repro_gate.fingerprint.lockfiles import describe_lockfile, find_lockfiles


def collect_host(data_paths: Sequence[Path], workdir: Path, *, hash_data_files: bool = True,
                 gate_files: Sequence[Path] = ()) -> dict[str, Any]:
    """Host-side facts; with `hash_data_files=False` data paths are only checked to exist;
    `gate_files` (the gate's lock and output directories) are no part of the code's state."""
    workdir = Path(workdir)
    paths = [str(path) for path in data_paths]
    data = hash_data(paths, workdir) if hash_data_files else list_data(paths, workdir)
    return {
        "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "code": collect_code(workdir, gate_files),
        "data": data,
        "lockfiles": collect_lockfiles(workdir),
        "cpu": collect_cpu(),
        "gpus": collect_gpus(),
    }


def collect_lockfiles(workdir: Path) -> list[dict[str, Any]]:
    """Every lockfile from `workdir` up to the repository root, labelled relative to `workdir`."""
    found = find_lockfiles(workdir, stop_at=repository_root(workdir))
    return [
        describe_lockfile(path, os.path.relpath(path, workdir).replace(os.sep, "/"))
        for path in found
    ]


def list_data(paths: list[str], workdir: Path) -> dict[str, Any]:
    """The data section without hashing: which configured paths exist."""
    entries = []
    for path in paths:
        full = Path(workdir, path)
        label = data_label(full, workdir)
        entry: dict[str, Any] = {"path": label, "sha256": None, "bytes": 0, "files": 0}
        if full.exists():
            entry.update(kind="directory" if full.is_dir() else "file", note="not hashed")
        else:
            entry["error"] = "does not exist"
        entries.append(entry)
    return {"paths": entries, "bytes": 0, "files": 0, "hashed": False}
