"""A run's files as the gate reads them back: inside the run folder, never through a link.

A training writes its run folder, so it can put a link where the gate expects its records
(`.repro-gate` -> another run's probe folder, `model.pt` -> a host file). Every path is walked
one component at a time from the run folder's own descriptor, each folder opened with
O_NOFOLLOW | O_DIRECTORY and the file with O_NOFOLLOW: a link anywhere on the way, a `..`, or
something that is neither a folder nor a regular file (a FIFO, a device) is the error
`run_tampered` naming the path. Nothing is resolved by path after the check, so a process of
the run that is still alive (fail-fast reads while run B runs) cannot swap a link in between.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from repro_gate.errors import RunTamperedError

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO the run left must not block the gate; fstat then refuses it.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
LINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)  # O_NOFOLLOW met a link; a file where a folder was


def read_bytes(run_dir: Path, rel: str, offset: int = 0) -> bytes | None:
    """The bytes of `rel` in `run_dir` from `offset` on; None when it does not exist."""
    with _opened_file(run_dir, rel) as fd:
        if fd is None:
            return None
        os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)


def write_bytes(run_dir: Path, rel: str, data: bytes) -> None:
    """Rewrite the existing regular file `rel` in `run_dir` with `data`."""
    with _opened_file(run_dir, rel, os.O_RDWR) as fd:
        if fd is None:
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


def create(run_dir: Path, rel: str) -> None:
    """Create the empty file `rel` in `run_dir` (its folder exists); FileExistsError when the
    name is taken, by a link too (never followed)."""
    parts = _parts(run_dir, rel)
    folder = PurePosixPath(*parts[:-1]).as_posix() if len(parts) > 1 else ""
    with _opened_folder(run_dir, folder) as parent:
        if parent is None:
            raise FileNotFoundError(f"{run_dir / folder} does not exist")
        os.close(os.open(parts[-1], CREATE_FLAGS, 0o644, dir_fd=parent))


def names(run_dir: Path, rel: str) -> list[str]:
    """The names in folder `rel` of `run_dir` (empty when it does not exist), sorted."""
    with _opened_folder(run_dir, rel) as fd:
        return [] if fd is None else sorted(os.listdir(fd))


def is_file(run_dir: Path, rel: str) -> bool:
    """Whether `rel` is a regular file of `run_dir` (reached without a link)."""
    with _opened_file(run_dir, rel) as fd:
        return fd is not None


@contextlib.contextmanager
def _opened_folder(run_dir: Path, rel: str) -> Iterator[int | None]:
    parts = _parts(run_dir, rel)
    fd = _open_root(run_dir)
    try:
        for index, part in enumerate(parts):
            inner = _open_at(fd, part, FOLDER_FLAGS, run_dir, parts[: index + 1])
            os.close(fd)
            fd = -1
            if inner is None:
                break
            fd = inner
        yield None if fd < 0 else fd
    finally:
        if fd >= 0:
            os.close(fd)


@contextlib.contextmanager
def _opened_file(run_dir: Path, rel: str, access: int = 0) -> Iterator[int | None]:
    parts = _parts(run_dir, rel)
    folder = PurePosixPath(*parts[:-1]).as_posix() if len(parts) > 1 else ""
    with _opened_folder(run_dir, folder) as parent:
        fd = None if parent is None else _open_at(parent, parts[-1], FILE_FLAGS | access,
                                                   run_dir, parts)
    if fd is None:
        yield None
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunTamperedError(f"{run_dir.joinpath(*parts)} is not a regular file: the gate"
                                   " reads back only the run's own files")
        yield fd
    finally:
        os.close(fd)


def _parts(run_dir: Path, rel: str) -> list[str]:
    parts = [part for part in PurePosixPath(rel).parts if part not in ("", ".")]
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise RunTamperedError(f"{run_dir / rel} leads out of the run folder {run_dir}")
    return parts


def _open_root(run_dir: Path) -> int:
    try:
        return os.open(run_dir, FOLDER_FLAGS)
    except OSError as error:
        if error.errno in LINK_ERRORS:
            raise RunTamperedError(f"the run folder {run_dir} is not a folder (a link?)"
                                   ) from None
        raise


def _open_at(parent: int, name: str, flags: int, run_dir: Path, parts: list[str]) -> int | None:
    """`name` opened in the folder `parent`; None when it does not exist."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in LINK_ERRORS:
            raise RunTamperedError(f"{run_dir.joinpath(*parts)} is a link or not what the gate"
                                   " wrote there: a run's files are read only inside its run"
                                   " folder, never through a link") from None
        raise
