"""A slot's folders on the host, and who owns them (docs/runner.md: host layout).

    <work_root>/slot<N>/            the slot's user, 0700: no other slot's engine can enter
        work/                       the jobs' work folder, mounted at the same path
        status/                     the job-started hook's status, mounted at the hook's path
        proxy/docker.sock           the filter's socket: the runner's /var/run/docker.sock
        pins/                       root's: the bind sources the filter pinned (proxy/pins.py)
        engine/                     the slot's rootless engine: HOME, data, state and socket

With the shared engine there is no slot user and root owns everything, as before.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from repro_gate.runner.slots import Slot

PRIVATE = 0o700
OPEN = 0o777  # the runner image's user (uid 1001 in actions/runner) is not the slot's root
TRAVERSE = 0o711  # work_root: slot users pass through it, list nothing


@dataclass(frozen=True)
class Owner:
    """The numeric owner of a slot's folders."""

    uid: int
    gid: int


ROOT = Owner(0, 0)


@dataclass(frozen=True)
class SlotFolders:
    base: Path

    @classmethod
    def under(cls, work_root: Path, slot: Slot) -> SlotFolders:
        return cls(work_root / f"slot{slot.index}")

    @property
    def work(self) -> Path:
        return self.base / "work"

    @property
    def status(self) -> Path:
        return self.base / "status"

    @property
    def proxy_socket(self) -> Path:
        return self.base / "proxy" / "docker.sock"

    @property
    def pins(self) -> Path:
        return self.base / "pins"

    @property
    def engine(self) -> Path:
        return self.base / "engine"

    @property
    def engine_data(self) -> Path:
        return self.engine / "data"

    @property
    def engine_exec(self) -> Path:
        """The engine's state; emptied at each start (a killed engine leaves it behind)."""
        return self.engine / "exec"

    @property
    def engine_runtime(self) -> Path:
        """XDG_RUNTIME_DIR of the engine's launcher; emptied at each start too."""
        return self.engine / "run"

    @property
    def engine_socket(self) -> Path:
        return self.engine_runtime / "docker.sock"

    @property
    def engine_log(self) -> Path:
        return self.engine / "engine.log"

    def create(self, owner: Owner, engine: bool = True) -> list[str]:
        """The folders with their owners and modes (the engine's only for a slot engine);
        what had to change, in words."""
        changes: list[str] = []
        work_root = self.base.parent
        if not work_root.is_dir():
            work_root.mkdir(parents=True)
            changes.append(f"created {work_root}")
        changes += _ensure(work_root, ROOT, TRAVERSE, create=False)
        changes += _ensure(self.base, owner, PRIVATE)
        for folder in (self.work, self.status):
            changes += _ensure(folder, owner, OPEN)
        private = [self.proxy_socket.parent] + ([self.engine, self.engine_data] if engine else [])
        for folder in private:
            changes += _ensure(folder, owner, PRIVATE)
        return changes

    def reset_engine_state(self, owner: Owner) -> None:
        """Empty the engine's state folders: a killed engine leaves locks and sockets."""
        for folder in (self.engine_exec, self.engine_runtime):
            shutil.rmtree(folder, ignore_errors=True)
            _ensure(folder, owner, PRIVATE)


def _ensure(folder: Path, owner: Owner, mode: int, create: bool = True) -> list[str]:
    if create and not folder.is_dir():
        folder.mkdir()
        os.chown(folder, owner.uid, owner.gid)
        folder.chmod(mode)
        return [f"created {folder} (owner {owner.uid}:{owner.gid}, mode {mode:04o})"]
    changes: list[str] = []
    status = folder.lstat()
    if (status.st_uid, status.st_gid) != (owner.uid, owner.gid):
        os.chown(folder, owner.uid, owner.gid, follow_symlinks=False)
        changes.append(f"{folder}: owner set to {owner.uid}:{owner.gid}")
    if status.st_mode & 0o7777 != mode:
        folder.chmod(mode)
        changes.append(f"{folder}: mode set to {mode:04o}")
    return changes


def wipe(folder: Path) -> None:
    """Everything inside `folder`, whoever owns it (the service runs as root); links unfollowed."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
