"""Bind sources pinned: what the filter checked is what the engine mounts.

A bind's source is a path the job can change. Checked by the filter and resolved again by the
engine at `start`, a folder of the work folder swapped for a symbolic link in between would hand
the container the link's target: the engine's own socket, the host's /tmp, /etc. So the filter
opens the source itself, one name at a time beneath the work folder, following no link
(`open_beneath`), binds what it opened, by its descriptor, onto a new entry of the slot's pin
folder, which only the service writes, and gives the engine that path (`pinned`). Nothing the
job does to its work folder afterwards changes what the path names.

The pin folder is made a shared mount before the engine starts; the engine's mount namespace
(a less privileged copy, so a slave of it) receives every pin made afterwards. Pins last until
the slot's reset or its endpoint's stop (`release_all`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import stat
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from repro_gate.errors import ErrorKind, GateError

MS_BIND = 4096
MS_REC = 16384
MS_SHARED = 1 << 20
MNT_DETACH = 2
PIN_FOLDER_MODE = 0o755  # the engine (the slot's user) passes through; only root writes
OPEN_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
PIN_NAME_BYTES = 8
PIN_NAME = re.compile(rf"^[0-9a-f]{{{2 * PIN_NAME_BYTES}}}$")


class PinRefused(ValueError):
    """A bind source the filter cannot pin; the text says why, in one line."""


def open_beneath(folder: Path, source: str) -> int:
    """An O_PATH descriptor of `source`, a path inside `folder`, opened one name at a time from
    `folder` without following any link; PinRefused when a link, `..` or a missing name is on
    the way (what RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS of openat2 refuse)."""
    try:
        names = PurePosixPath(source).relative_to(folder).parts
    except ValueError:
        raise PinRefused(f"bind {source!r}: not spelled inside the work folder {folder}") from None
    current = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            if name == "..":
                raise PinRefused(f"bind {source!r}: '..' is refused in a bind source")
            try:
                following = os.open(name, OPEN_PATH, dir_fd=current)
            except FileNotFoundError:
                raise PinRefused(f"bind {source!r}: {name!r} does not exist") from None
            os.close(current)
            current = following
            if stat.S_ISLNK(os.fstat(current).st_mode):
                raise PinRefused(f"bind {source!r}: {name!r} is a symbolic link (a bind source"
                                 " is followed by no link)")
    except BaseException:
        os.close(current)
        raise
    return current


def pinned(body: Mapping[str, Any], pin: Callable[[str], str]) -> dict[str, Any]:
    """The create body with each bind source (`Binds` host paths, `Mounts` of type bind, in
    `HostConfig` and at the top level) replaced by `pin(source)`. Runs after the checks and
    the runner-socket rewrite: the slot's proxy socket is not the job's to swap, so it stays."""
    rewritten = _pinned_settings(body, pin)
    for key, value in body.items():
        if key == "HostConfig" and isinstance(value, Mapping):
            rewritten[key] = _pinned_settings(value, pin)
    return rewritten


def _pinned_settings(settings: Mapping[str, Any], pin: Callable[[str], str]) -> dict[str, Any]:
    rewritten = dict(settings)
    binds = settings.get("Binds")
    if isinstance(binds, list):
        rewritten["Binds"] = [_pinned_bind(entry, pin) for entry in binds]
    mounts = settings.get("Mounts")
    if isinstance(mounts, list):
        rewritten["Mounts"] = [
            {**mount, "Source": pin(str(mount["Source"]))}
            if isinstance(mount, Mapping) and mount.get("Type") == "bind" and mount.get("Source")
            else mount for mount in mounts]
    return rewritten


def _pinned_bind(entry: object, pin: Callable[[str], str]) -> object:
    source, colon, rest = str(entry).partition(":")
    if not colon or not source.startswith("/"):
        return entry  # a named volume
    return f"{pin(source)}:{rest}"


class Pins:
    """The slot's pin folder: `prepare()` before the engine starts, `pin()` per bind source,
    `release_all()` at the reset, `close()` at the end."""

    def __init__(self, folder: Path, work_folder: Path, keep: frozenset[Path]) -> None:
        self.folder = folder
        self.work_folder = work_folder
        self.keep = keep  # sources pinned by nobody: the slot's proxy socket
        self.libc = ctypes.CDLL(None, use_errno=True)

    def prepare(self) -> None:
        """The pin folder, emptied, as a shared mount of its own; GateError (one line) when
        the service may not mount (it needs CAP_SYS_ADMIN, as the engines' newuidmap does)."""
        try:
            self._prepare()
        except OSError as error:
            raise GateError(f"the slot's folder of pinned bind sources {self.folder} cannot be"
                            f" set up: {error.strerror or error}", kind=ErrorKind.DOCKER) from None

    def _prepare(self) -> None:
        if self.folder.is_symlink() or (self.folder.exists() and not self.folder.is_dir()):
            self.folder.unlink()  # not the service's: the slot's user may have put it there
        self.folder.mkdir(mode=PIN_FOLDER_MODE, exist_ok=True)
        os.chown(self.folder, 0, 0, follow_symlinks=False)
        self.folder.chmod(PIN_FOLDER_MODE)
        self.release_all()
        while self._unmount(self.folder):  # earlier runs' own mounts of the folder
            pass
        self._mount(str(self.folder), self.folder, MS_BIND)
        self._mount("none", self.folder, MS_SHARED)

    def pin(self, source: str) -> str:
        """A path the engine mounts for `source`, which no job can change; PinRefused."""
        if Path(source) in self.keep:
            return source
        descriptor = open_beneath(self.work_folder, source)
        try:
            target = self.folder / secrets.token_hex(PIN_NAME_BYTES)
            if stat.S_ISDIR(os.fstat(descriptor).st_mode):
                target.mkdir(mode=0o755)
            else:
                target.touch(mode=0o644)
            self._mount(f"/proc/self/fd/{descriptor}", target, MS_BIND | MS_REC)
        except OSError as error:
            raise PinRefused(f"bind {source!r} could not be pinned: {error}") from None
        finally:
            os.close(descriptor)
        return str(target)

    def release_all(self) -> None:
        """Every pin unmounted and removed (the engine that used them is stopped)."""
        for entry in self.folder.iterdir():
            if not PIN_NAME.match(entry.name):
                continue
            while self._unmount(entry):
                pass
            with contextlib.suppress(OSError):
                if entry.is_dir():
                    entry.rmdir()
                else:
                    entry.unlink()

    def close(self) -> None:
        """The pins, then the pin folder's own mount."""
        with contextlib.suppress(OSError):
            self.release_all()
            while self._unmount(self.folder):
                pass

    def _mount(self, source: str, target: Path, flags: int) -> None:
        if self.libc.mount(source.encode(), str(target).encode(), None, flags, None) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"mount on {target}: {os.strerror(error)}")

    def _unmount(self, target: Path) -> bool:
        """Whether something was mounted there (and is now detached)."""
        return bool(self.libc.umount2(str(target).encode(), MNT_DETACH) == 0)
