"""A folder seen with its directory listings in reverse order: disorderfs, a FUSE file system
made for this (a Debian package), mounted read-only over the workspace for the run that varies
the file ordering (gate/vary_runs.py), whose overlay reads it as its lower layer.

The order is reversed, not shuffled: two listings of one folder differ as soon as it holds two
entries, and a run can be repeated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError, one_line

FUSE_DEVICE = Path("/dev/fuse")
DISORDERFS = "disorderfs"
UNMOUNT_SECONDS = 30.0
MOUNT_SECONDS = 30.0


def refusal() -> str | None:
    """Why this machine cannot list a folder in another order; None when it can."""
    if not FUSE_DEVICE.exists():
        return f"no {FUSE_DEVICE} (FUSE is not available here)"
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        return f"{FUSE_DEVICE} is not open to this user"
    if shutil.which(DISORDERFS) is None:
        return "disorderfs is not installed (the Debian package disorderfs)"
    if os.geteuid() != 0 and _fusermount() is None:
        return "fusermount is not installed (the package fuse3), so no FUSE mount can be undone"
    return None


@contextmanager
def reversed_listings(folder: Path, mount_point: Path) -> Iterator[Path]:
    """`folder` seen at `mount_point` (an empty folder), read-only, every listing reversed;
    unmounted on the way out, whatever happened inside."""
    try:
        subprocess.run([DISORDERFS, "-q", "--reverse-dirents=yes", "--shuffle-dirents=no",
                        "-o", "ro", str(folder), str(mount_point)], check=True,
                       capture_output=True, text=True, timeout=MOUNT_SECONDS)
    except (OSError, subprocess.SubprocessError) as error:
        said = getattr(error, "stderr", None) or one_line(error)
        raise GateError(f"disorderfs could not mount {folder}: {one_line(said)}",
                        kind=ErrorKind.OUTPUT_DIR) from None
    try:
        yield mount_point
    finally:
        unmount = ["umount", str(mount_point)] if os.geteuid() == 0 else [
            str(_fusermount()), "-u", str(mount_point)]
        subprocess.run(unmount, check=False, capture_output=True, timeout=UNMOUNT_SECONDS)


def _fusermount() -> str | None:
    return shutil.which("fusermount3") or shutil.which("fusermount")
