"""Which golden file a run is compared with, and where `bless` writes one.

A file named directly is always the one compared, whatever machine class it holds. A folder
(the default, `.repro-gate/golden/`) holds one file per machine class, `<class>.json`; the gate
picks the run's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repro_gate.config import Config

SUFFIX = ".json"


@dataclass(frozen=True)
class Choice:
    """The golden file for a run: `path` (it may not exist yet) and whether it was named."""

    path: Path
    named: bool  # a file named in `golden`, not picked from a folder
    folder: Path  # where the file is, or would be


def configured(config: Config) -> Path:
    """The `golden` path, absolute (a relative one is under the workdir)."""
    path = Path(config.golden.path)
    return path if path.is_absolute() else config.workdir / path


def choose(config: Config, machine_class: str) -> Choice:
    """The golden file for a run of `machine_class`."""
    path = configured(config)
    if is_folder(path, config.golden.path):
        return Choice(path / f"{machine_class}{SUFFIX}", named=False, folder=path)
    return Choice(path, named=True, folder=path.parent)


def is_folder(path: Path, written: str) -> bool:
    """A folder: one that exists, or a path written with a trailing slash or without `.json`."""
    if path.is_dir():
        return True
    return written.endswith("/") or path.suffix != SUFFIX


def shown(path: Path, root: Path) -> str:
    """`path` as a repository reads it: relative to `root` where it is inside it."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
