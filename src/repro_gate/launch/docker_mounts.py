"""What a training container sees of the gate's files, and as which user.

- The gate's runs start in their working copy (`<output_dir>/work` for every run, moved to
  `<run_dir>/work` after it, `gate.workcopy`), mounted read-write **at the workspace's own path**
  (the user's working directory), which is the container's working directory: a training sees
  the absolute paths a bare run sees, and writes `model.pt` or `checkpoints/` next to itself.
  Where the copy holds an empty mount point (a virtualenv, a `data:` path), the workspace's own
  is mounted over it, read-only: a link there would name itself.
- Run V-path (gate/vary_runs.py) sees its copy at another path; the workspace stays at its own,
  read-only, so what the training names by absolute path still resolves.
- The run directory is mounted read-write at its own path.
- The gate's folders inside the workspace (the output folder, every other gate's output folder,
  the lock folder) are hidden under an empty read-only tmpfs: no run sees another run's folder,
  the logs or the locks; its own run folder is mounted inside that mask. No run is given another
  run's records (fail-fast reads run B's trajectory on the gate's side).
- An `upgrade` environment's volume, read-only; the probe's directories read-only under
  /repro-gate/python-path/<n>.

Paths keep the names the gate sees (file names in probe output and logs mean the same on both
sides); a sibling container's bind mounts name *host* paths, translated by `PathTranslator`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker.types

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import RunSpec
from repro_gate.launch.host_paths import PathTranslator
from repro_gate.launch.namespaces import outermost

CONTAINER_PYTHON_PATH = PurePosixPath("/repro-gate/python-path")
# Used when the workspace belongs to root: the training never runs as root.
NOBODY = "65534:65534"
MASK_BYTES = 1 << 20  # a mask holds only the mount points of the run's own folders


@dataclass
class RunMounts:
    mounts: list[docker.types.Mount]
    python_path: list[str]  # where the probe's directories are, in the container


def default_user(workspace: Path) -> str:
    """The workspace owner (so the runner can clean up what the training wrote); nobody for root."""
    try:
        info = workspace.stat()
    except OSError:
        return NOBODY
    return NOBODY if info.st_uid == 0 else f"{info.st_uid}:{info.st_gid}"


def make_writable_for(directory: Path, user: str) -> None:
    """Give the run directory and everything in it (the working copy) to the training's user,
    or open it up when we may not chown."""
    uid_text, _, gid_text = user.partition(":")
    try:
        owner: tuple[int, int] | None = (int(uid_text), int(gid_text or uid_text))
    except ValueError:  # a user name: only the image knows its uid
        owner = None
    for root, dirs, files in os.walk(directory):
        _give(Path(root), owner, 0o777)
        for name in [*dirs, *files]:
            path = Path(root, name)
            if not path.is_symlink() and path.is_file():
                _give(path, owner, 0o666)


def _give(path: Path, owner: tuple[int, int] | None, open_mode: int) -> None:
    if owner is not None:
        try:
            os.chown(path, *owner)
            return
        except PermissionError:
            pass
    path.chmod(path.stat().st_mode | open_mode)


def run_mounts(spec: RunSpec, staging: Path, translator: PathTranslator) -> RunMounts:
    """The mounts of one run; probe directories the host cannot see are copied to `staging`."""
    workspace, seen = spec.workspace or spec.workdir, working_directory(spec)
    mounts = []
    if spec.workspace is None or seen != workspace:  # the workspace itself, read-only
        mounts.append(bind(translator, workspace, str(workspace), read_only=True))
    if spec.workspace is not None:  # the run's working copy, where the run sees it
        mounts.append(bind(translator, spec.workdir, str(seen), read_only=False))
        mounts += [bind(translator, path, str(seen / path.relative_to(workspace)),
                        read_only=True) for path in spec.shared]
    mounts += [mask(folder) for folder in masked_folders(spec)]
    mounts.append(bind(translator, spec.run_dir, str(spec.run_dir), read_only=False))
    if (venv := spec.python_environment) and venv.volume:  # built by environments/, read-only
        mounts.append(docker.types.Mount(str(venv.root), venv.volume, "volume", read_only=True))
    container_paths = []
    for index, directory in enumerate(spec.python_path):
        target = str(CONTAINER_PYTHON_PATH / str(index))
        source = directory
        if translator.host_path(directory) is None:
            # Inside the gate's image (the probe): copy it where the host can see it.
            source = staging / str(index)
            shutil.rmtree(source, ignore_errors=True)
            shutil.copytree(directory, source, ignore=shutil.ignore_patterns("__pycache__"))
        mounts.append(bind(translator, source, target, read_only=True))
        container_paths.append(target)
    return RunMounts(mounts, container_paths)


def working_directory(spec: RunSpec) -> Path:
    """Where the run starts in its container: its copy at the workspace's path (or where run
    V-path sees it); the workspace itself for a run given no copy."""
    if spec.workspace is None:
        return spec.workdir
    return spec.workspace_at or spec.workspace


def masked_folders(spec: RunSpec) -> tuple[Path, ...]:
    """The gate's folders the workspace's mount would show, outermost only (one mask hides
    what lies below it)."""
    workspace = (spec.workspace or spec.workdir).resolve()
    inside = [folder.resolve() for folder in spec.hidden
              if folder.resolve().is_relative_to(workspace) and folder.resolve() != workspace]
    return tuple(sorted(outermost(inside)))


def mask(folder: Path) -> docker.types.Mount:
    """An empty read-only tmpfs over `folder`: the container sees nothing of it."""
    return docker.types.Mount(str(folder), None, type="tmpfs", read_only=True,
                              tmpfs_size=MASK_BYTES)


def bind(translator: PathTranslator, path: Path, target: str, read_only: bool
         ) -> docker.types.Mount:
    """A bind mount of `path` at `target`; an error when the Docker host cannot see `path`."""
    source = translator.host_path(path)
    if source is None:
        raise GateError(
            f"{path} is not on a volume the Docker host can see; keep the workspace and"
            " output_dir under the mounted workspace",
            kind=ErrorKind.DOCKER,
        )
    return docker.types.Mount(target, source, type="bind", read_only=read_only)


def container_argv_item(item: str, spec: RunSpec, python_path: list[str]) -> str:
    """An argument naming a file in a probe directory (the embedded reference training) must
    name it where that directory is mounted."""
    for directory, target in zip(spec.python_path, python_path, strict=True):
        try:
            rest = Path(item).relative_to(directory)
        except ValueError:
            continue
        return str(PurePosixPath(target) / rest)
    return item
