"""Checksums of the configured data paths: streamed sha256 per file, in parallel over files.

A path's digest is the sha256 of its `sha256sum`-style listing, `<hex>  <relative path>\\n` per
file in byte order of the paths, so it can be recomputed with standard tools.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from repro_gate.compare.files import sha256_file

# Per-file digests are kept (for diffs that name files) up to this many files per path.
MAX_LISTED_FILES = 10_000


def list_files(root: Path) -> list[str]:
    """Relative POSIX paths of the files under `root` (symlinks followed), in byte order."""
    if root.is_file():
        return [""]
    found = []
    for directory, _subdirs, files in os.walk(root, followlinks=True):
        for name in files:
            full = os.path.join(directory, name)
            if os.path.isfile(full):
                found.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return sorted(found, key=lambda p: p.encode("utf-8", errors="surrogateescape"))


def hash_path(root: Path, label: str, workers: int | None = None) -> dict[str, Any]:
    """Digest, byte and file counts of one data path (a file or a directory)."""
    if not root.exists():
        return {"path": label, "sha256": None, "bytes": 0, "files": 0, "error": "does not exist"}
    relative = list_files(root)
    targets = [root if rel == "" else root / rel for rel in relative]
    try:
        with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
            digests = list(pool.map(sha256_file, targets))
        sizes = [target.stat().st_size for target in targets]
    except OSError as error:
        return {"path": label, "sha256": None, "bytes": 0, "files": 0,
                "error": f"cannot read: {error.strerror or error}"}
    names = [rel or root.name for rel in relative]
    listing = "".join(f"{digest}  {name}\n" for digest, name in zip(digests, names, strict=True))
    result: dict[str, Any] = {
        "path": label,
        "kind": "file" if root.is_file() else "directory",
        "sha256": hashlib.sha256(listing.encode("utf-8", errors="surrogateescape")).hexdigest(),
        "bytes": sum(sizes),
        "files": len(targets),
    }
    if len(targets) <= MAX_LISTED_FILES:
        result["file_sha256"] = dict(zip(names, digests, strict=True))
    return result


def hash_data(paths: list[str], base: Path, workers: int | None = None) -> dict[str, Any]:
    """The `data` section: one entry per configured path, labelled relative to `base`."""
    entries = [hash_path(Path(base, path), data_label(Path(base, path), base), workers)
               for path in paths]
    return {
        "paths": entries,
        "bytes": sum(entry["bytes"] for entry in entries),
        "files": sum(entry["files"] for entry in entries),
        "hashed": True,
    }


def default_workers() -> int:
    """Threads for hashing: the CPUs this process may use, at most 8 (disks saturate before)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count() or 1
    return max(1, min(8, available))


def data_label(path: Path, base: Path) -> str:
    """Path as written in the fingerprint: relative to `base`, never an absolute host path."""
    absolute = path.resolve()
    try:
        text = absolute.relative_to(base.resolve()).as_posix()
    except ValueError:
        text = os.path.relpath(absolute, base.resolve()).replace(os.sep, "/")
    if path.is_dir():
        text = text.rstrip("/") + "/"
    return "./" if text in ("./", "/") else text
