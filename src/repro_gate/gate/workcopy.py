"""Each run's own view of the working directory, and what the run wrote there.

Every run (A, B, the cost run, the noise floor, the localisation run) writes into its own
`<output_dir>/runs/<name>/work`: a file one run writes (a checkpoint to resume from, a cache) is
never seen by the next run, and nothing is left in the user's tree.

Local runs, where the kernel allows it, see the working directory at its own path through an
overlay whose upper layer is `work/` (launch/namespaces.py): nothing is copied, and after the
run `work/` holds exactly what the run wrote, a deletion as a whiteout (`Layer`). Elsewhere
(Docker mode, or namespaces refused) the run starts in a copy, made as follows.

- The copy holds everything, `.git` included (a training may ask git for its commit), except the
  gate's own files: its lock directory and every gate output directory (this gate's, wherever
  it is, and any directory another gate's output lock marks).
- Virtual environments (folders holding `pyvenv.cfg`) and the paths listed under `data:` are
  not copied: the copy holds an absolute link to the user's own, or, for a launcher that binds
  (Docker), an empty mount point where the container shows the user's own read-only. What the
  copy costs is the code, not the environment or the data set.
- The copy is made at one path for every run, `<output_dir>/work`, and moved into its run
  directory once the run is over. A container sees it at the working directory's own path
  (launch/docker_mounts.py), as an overlay shows it; a local copy is seen where it is made.
  Either way a training that records its working directory (in a checkpoint, a config dump)
  records the same path in every run of a gate.
- Files are cloned copy-on-write where the filesystem allows (the FICLONE ioctl: btrfs, XFS,
  overlayfs over them), else copied; never hard-linked, so a training that rewrites a file in
  place changes only its copy. Symlinks stay symlinks; a relative one that leads out of the
  working directory is made absolute so it still names the same file from the copy.
- After the run, every file the run did not write is removed from the copy (with directories
  left empty): what stays in `work/` is exactly what the run wrote.
- The probe's records name the user's files, not the copy's: a path into the copy in the
  probe's JSON files (an op's `file`, where a parameter was created) is rewritten to the same
  path in the working directory, so reports point at the user's own `train.py:42`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.file_lock import OUTPUT_LOCK, WORKDIR_LOCK_DIR
from repro_gate.launch.base import Isolation
from repro_gate.probe import PROBE_SUBDIR, run_files

WORK_SUBDIR = "work"  # the run's working copy, inside its run directory
COPY_SUBDIR = "work"  # where every run's copy is made, inside the output directory
VENV_MARKER = "pyvenv.cfg"  # a folder holding it is a virtual environment: linked, not copied
SCRATCH_SUBDIR = ".overlay-work"  # overlayfs's own work folder, beside the upper layer
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
WHITEOUT_DEVICE = 0  # overlayfs marks a deleted file with a character device 0:0


@dataclass(frozen=True)
class Layer:
    """The upper layer of a run's overlay: what the run wrote over the working directory."""

    path: Path

    def written(self) -> set[str]:
        """Relative paths of the files and links the run created or changed."""
        return {rel for rel, info in _entries(self.path).items() if not _is_whiteout(info)}

    def deleted(self) -> set[str]:
        """Relative paths of the working directory's entries the run deleted (whiteouts)."""
        return {rel for rel, info in _entries(self.path).items() if _is_whiteout(info)}


def isolation(workdir: Path, run_dir: Path) -> Isolation:
    """A run's overlay layers in its run directory."""
    if not workdir.is_dir():
        raise GateError(f"workdir is not a directory: {workdir}", kind=ErrorKind.CONFIG)
    upper, scratch = run_dir / WORK_SUBDIR, run_dir / SCRATCH_SUBDIR
    try:
        upper.mkdir()
        scratch.mkdir()
    except OSError as error:
        raise GateError(f"cannot make the run's working layer in {run_dir}:"
                        f" {error.strerror or error}", kind=ErrorKind.OUTPUT_DIR) from None
    return Isolation(upper, scratch)


def foreign_entry(workdir: Path, output_dir: Path, uid: int, gid: int) -> Path | None:
    """The first file or folder of `workdir` (the gate's folders left out) that user `uid` of
    group `gid` does not own: overlayfs cannot copy it up in a namespace that maps only them
    (EOVERFLOW), so a non-root gate's runs get a copy instead. A walk of names and owners only,
    once per gate: a fraction of a second for a virtualenv of 30,000 files."""
    for directory, dirs, names in os.walk(workdir):
        dirs[:] = [d for d in dirs if not is_gate_file(Path(directory, d), output_dir)]
        for name in [*dirs, *names]:
            path = Path(directory, name)
            with contextlib.suppress(OSError):
                info = path.lstat()
                if not stat.S_ISLNK(info.st_mode) and (info.st_uid, info.st_gid) != (uid, gid):
                    return path
    return None


def remove_scratch(layers: Isolation) -> None:
    """Overlayfs's work folder, once no overlay uses it (its inner folder may be mode 000)."""
    for directory, dirs, _ in os.walk(layers.scratch):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(Path(directory, name), 0o700)
    shutil.rmtree(layers.scratch, ignore_errors=True)


def gate_folders(workdir: Path, output_dir: Path) -> tuple[Path, ...]:
    """The output directory, and every gate folder in the working directory at any depth (the
    lock folder, another gate's output): what a run must not see. Links and virtualenvs are
    not walked into (a copy links to them, the gate never writes there)."""
    found = [output_dir]
    for directory, dirs, _ in os.walk(workdir):
        kept = []
        for name in dirs:
            path = Path(directory, name)
            if is_gate_file(path, output_dir):
                if path != output_dir:
                    found.append(path)
            elif not path.is_symlink() and not (path / VENV_MARKER).is_file():
                kept.append(name)
        dirs[:] = kept
    return tuple(found)


def _is_whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == WHITEOUT_DEVICE



@dataclass(frozen=True)
class WorkCopy:
    """A run's working copy (`path`) of the working directory (`source`)."""

    path: Path
    source: Path
    # Relative paths the copy holds as empty mount points (virtualenvs, `data:`), for a
    # launcher that binds the working directory's own there.
    mount_points: frozenset[str] = frozenset()

    @property
    def shared(self) -> tuple[Path, ...]:
        """The working directory's paths shown at the copy's mount points."""
        return tuple(self.source / rel for rel in sorted(self.mount_points))

    def written(self) -> set[str]:
        """Relative paths of the files and links the run created or changed in its copy: those
        that differ from the working directory's in kind, size or modification time (the copy
        keeps them)."""
        root = self.source.resolve()
        return {rel for rel, info in _entries(self.path).items()
                if rel not in self.mount_points
                and not (_same(info, self.source / rel) or _own_link(self.path / rel, root / rel))}

    def name_workspace_files(self, run_dir: Path) -> None:
        """Rewrite paths into the copy as paths into the working directory in the probe's JSON
        files (written by the run; read back by the gate, never through a link:
        probe/run_files.py)."""
        copy = json.dumps(str(self.path))[1:-1]
        pattern = re.compile(re.escape(copy) + r'(?=[/"])')
        workspace = json.dumps(str(self.source))[1:-1]
        for name in run_files.names(run_dir, PROBE_SUBDIR):
            rel = f"{PROBE_SUBDIR}/{name}"
            if not name.endswith(".json") or not run_files.is_file(run_dir, rel):
                continue
            try:
                text = (run_files.read_bytes(run_dir, rel) or b"").decode("utf-8")
                if copy in text:
                    replaced = pattern.sub(lambda _: workspace, text)
                    run_files.write_bytes(run_dir, rel, replaced.encode("utf-8"))
            except (OSError, UnicodeError):  # unreadable: the gate's reader reports it
                continue

    def move_to(self, target: Path) -> WorkCopy:
        """The copy, moved (renamed: the same filesystem) to `target` once its run is over."""
        try:
            os.replace(self.path, target)
        except OSError as error:
            raise GateError(f"cannot move the working copy {self.path} to {target}:"
                            f" {error.strerror or error}", kind=ErrorKind.OUTPUT_DIR) from None
        return WorkCopy(target, self.source, self.mount_points)

    def keep_only_written(self) -> None:
        """Remove what the run did not write, then the directories that are left empty."""
        written = self.written()
        for rel in _entries(self.path):
            if rel not in written:
                (self.path / rel).unlink(missing_ok=True)
        for directory, _, _ in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            if Path(directory) != self.path:
                with contextlib.suppress(OSError):  # not empty, or not ours to remove
                    os.rmdir(directory)


@dataclass
class Tally:
    """How far a copy got, for its status lines (read from another thread)."""

    files: int = 0
    bytes: int = 0

    def text(self) -> str:
        return f"{self.files} files, {self.bytes / 1e6:.0f} MB copied"


def make(workdir: Path, target: Path, output_dir: Path, tally: Tally | None = None,
         linked: tuple[Path, ...] = (), mount_points: bool = False) -> WorkCopy:
    """A fresh copy of `workdir` at `target` (which must not exist) without the gate's files;
    virtual environments and the `linked` paths (`data:`, relative to `workdir`) are links, or
    empty mount points with `mount_points`."""
    if not workdir.is_dir():
        raise GateError(f"workdir is not a directory: {workdir}", kind=ErrorKind.CONFIG)
    root = workdir.resolve()
    walk = _Walk(root, output_dir.resolve(), tally or Tally(),
                 frozenset(Path(os.path.normpath(root / path)) for path in linked),
                 mount_points)
    try:
        _copy_tree(root, target, walk)
    except OSError as error:
        where = error.filename or workdir
        raise GateError(
            f"cannot copy the working directory into {target}: {where}:"
            f" {error.strerror or error}",
            kind=ErrorKind.OUTPUT_DIR,
        ) from None
    shared = (path.relative_to(root).as_posix() for path in walk.shared)
    return WorkCopy(target, workdir, frozenset(shared) if mount_points else frozenset())


def is_gate_file(path: Path, output_dir: Path) -> bool:
    """The gate's lock directory, or a gate's output directory (this one or another's)."""
    if not path.is_dir() or path.is_symlink():
        return False
    return (path.name == WORKDIR_LOCK_DIR or path.resolve() == output_dir
            or (path / OUTPUT_LOCK).is_file())


@dataclass(frozen=True)
class _Walk:
    """What every level of a copy needs: the tree's root, the output folder, the tally."""

    root: Path
    output_dir: Path
    tally: Tally
    linked: frozenset[Path]  # absolute: the `data:` paths
    mount_points: bool  # an empty folder or file where a link would be
    shared: list[Path] = field(default_factory=list)  # what was linked, or left a mount point

    def links(self, path: Path) -> bool:
        """Whether the copy links to `path` instead of copying it: data, a virtualenv."""
        return path in self.linked or (path.is_dir() and (path / VENV_MARKER).is_file())


def _copy_tree(source: Path, target: Path, walk: _Walk) -> None:
    target.mkdir(parents=True)
    for entry in os.scandir(source):
        path, copy = Path(entry.path), target / entry.name
        if is_gate_file(path, walk.output_dir):
            continue
        if not entry.is_symlink() and walk.links(path):
            walk.shared.append(path)
            if not walk.mount_points:
                os.symlink(path, copy)
            elif entry.is_dir():
                copy.mkdir()
            else:
                copy.touch()
        elif entry.is_symlink():
            os.symlink(_link_target(path, walk.root), copy)
        elif entry.is_dir():
            _copy_tree(path, copy, walk)
        elif entry.is_file():
            _copy_file(path, copy)
            walk.tally.files += 1
            walk.tally.bytes += entry.stat(follow_symlinks=False).st_size
        # sockets, fifos and devices are no part of a project
    shutil.copystat(source, target)


def _copy_file(source: Path, target: Path) -> None:
    """Clone `source` copy-on-write when the filesystem can, else copy its bytes."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        try:
            fcntl.ioctl(writer.fileno(), FICLONE, reader.fileno())
        except OSError:
            shutil.copyfileobj(reader, writer, 1 << 20)
    shutil.copystat(source, target)


def _link_target(link: Path, root: Path) -> str:
    """The link's target as the copy must write it: a relative target that leaves `root`
    becomes absolute (the copy sits elsewhere), any other is kept as it is."""
    target = os.readlink(link)
    if os.path.isabs(target):
        return target
    resolved = Path(os.path.normpath(link.parent / target))
    return target if resolved.is_relative_to(root) else str(resolved)


def _entries(root: Path) -> dict[str, os.stat_result]:
    """Files and symlinks below `root` (links not followed), by relative path."""
    found: dict[str, os.stat_result] = {}
    for directory, dirs, names in os.walk(root):
        # Names of files, links and (for whiteouts) devices; links to folders are in `dirs`.
        for name in [*names, *(d for d in dirs if Path(directory, d).is_symlink())]:
            path = Path(directory, name)
            found[path.relative_to(root).as_posix()] = path.lstat()
    return found


def _own_link(copied: Path, original: Path) -> bool:
    """Whether the copy's entry is still the link the copy made to `original` (data, venv)."""
    try:
        return os.readlink(copied) == str(original)
    except OSError:
        return False


def _same(copied: os.stat_result, original: Path) -> bool:
    """Whether a copy's entry is still what the copy made of `original`."""
    try:
        info = original.lstat()
    except OSError:
        return False
    if stat.S_ISLNK(copied.st_mode) or stat.S_ISLNK(info.st_mode):
        return stat.S_ISLNK(copied.st_mode) and stat.S_ISLNK(info.st_mode)
    return (stat.S_ISREG(copied.st_mode) and stat.S_ISREG(info.st_mode)
            and (copied.st_size, copied.st_mtime_ns) == (info.st_size, info.st_mtime_ns))
