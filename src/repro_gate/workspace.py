"""The repository the gate runs for, and paths of files inside it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath


def workspace_root(environ: Mapping[str, str] | None = None) -> Path:
    """`GITHUB_WORKSPACE` in Actions, else the current directory."""
    env = os.environ if environ is None else environ
    return Path(env.get("GITHUB_WORKSPACE") or os.getcwd())


def repository_path(file: object, workspace: Path | str | None) -> str | None:
    """`file` relative to the repository root (POSIX), or None when it lies outside it."""
    if not isinstance(file, str) or not file or workspace is None:
        return None
    root = Path(os.path.normpath(workspace))
    candidate = Path(os.path.normpath(file if os.path.isabs(file) else root / file))
    try:
        relative = candidate.relative_to(root)
    except ValueError:
        return None
    if not relative.parts:
        return None
    return PurePosixPath(*relative.parts).as_posix()
