"""What the reset removes from a stopped slot engine's data root, file by file, as root.

The engine is stopped (its PID namespace ended every process it ran) before this runs, and
started again on the same data root afterwards. What is removed cannot come back when it
starts: every container (a `RestartPolicy: always` container would otherwise be started again
by the engine itself), their writable layers, every network, the build caches, the engine's
own containerd state, and, unless environment caches are kept, every volume. What stays is the
image store (`image/`, and the driver's layers that an image's layer names); the engine then
removes, through its API, the images nothing keeps (slot_reset.py).

The data root belongs to the slot's user, whom a job may have reached: nothing here follows a
symbolic link. The data root is opened without following one, and every removal is relative to
that descriptor.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

# Folders of Docker 20.10's data root that hold what a job made or ran (not images).
JOB_STATE = ("containers", "network", "buildkit", "builder", "tmp", "containerd", "plugins",
             "swarm", "runtimes", "trust")
VOLUMES = "volumes"
IMAGE_STORE = "image"  # image/<storage driver>/{imagedb,layerdb,repositories.json,distribution}
LAYER_LINKS = "l"  # overlay2's folder of short links to its layers
VFS_LAYERS = "dir"  # vfs keeps its layers one level down
LAYER_ID = re.compile(r"^[0-9a-f]{64}$")  # a layer's cache-id, the name of its driver folder


def empty_job_state(data_root: Path, keep_volumes: bool) -> list[str]:
    """Remove from the stopped engine's data root what a job made or ran; the entries removed.
    OSError when the data root is not a real folder (a link planted in its place)."""
    removed: list[str] = []
    descriptor = os.open(data_root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        doomed = JOB_STATE if keep_volumes else (*JOB_STATE, VOLUMES)
        for name in doomed:
            if _remove(descriptor, name):
                removed.append(name)
        removed += _container_layers(descriptor)
    finally:
        os.close(descriptor)
    return removed


def _remove(parent: int, name: str) -> bool:
    """`name` in the folder `parent` (a descriptor), whatever it is; links are unlinked."""
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(found.st_mode):
        # The folder as `parent` holds it, whatever its path says now (Python 3.10's rmtree
        # takes no dir_fd); rmtree itself never follows a link inside it.
        shutil.rmtree(f"/proc/self/fd/{parent}/{name}")
    else:
        os.unlink(name, dir_fd=parent)
    return True


@contextlib.contextmanager
def _opened(parent: int, name: str) -> Iterator[int | None]:
    """A folder under `parent`, opened without following a link; None when there is none."""
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except (FileNotFoundError, NotADirectoryError):
        yield None
        return
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _container_layers(data: int) -> list[str]:
    """Every storage driver's writable layers of containers: the layer store's `mounts`, and
    each driver folder no image layer names (a container's layer, its init layer, a leftover
    of a killed engine). The engine would never remove them itself once their containers are
    gone."""
    removed: list[str] = []
    with _opened(data, IMAGE_STORE) as images:
        if images is None:
            return removed
        for driver in sorted(os.listdir(images)):
            kept = _layers_of_images(images, driver)
            if kept is None:
                continue
            if _remove_mounts(images, driver):
                removed.append(f"{IMAGE_STORE}/{driver}/layerdb/mounts")
            removed += _unnamed_layers(data, driver, kept)
    return removed


def _layers_of_images(images: int, driver: str) -> set[str] | None:
    """The driver folders image layers use (`layerdb/sha256/<chain ID>/cache-id`); None
    when the driver has no layer store."""
    with _opened(images, driver) as store:
        if store is None:
            return None
        with _opened(store, "layerdb") as layerdb:
            return None if layerdb is None else _image_layer_ids(layerdb)


def _remove_mounts(images: int, driver: str) -> bool:
    """The layer store's record of containers' layers (`layerdb/mounts`)."""
    with _opened(images, driver) as store:
        if store is None:
            return False
        with _opened(store, "layerdb") as layerdb:
            return layerdb is not None and _remove(layerdb, "mounts")


def _image_layer_ids(layerdb: int) -> set[str]:
    """The driver folders image layers use (`layerdb/sha256/<chain ID>/cache-id`)."""
    ids: set[str] = set()
    with _opened(layerdb, "sha256") as chains:
        if chains is None:
            return ids
        for chain in os.listdir(chains):
            with _opened(chains, chain) as layer:
                if layer is None:
                    continue
                with contextlib.suppress(OSError):
                    descriptor = os.open("cache-id", os.O_RDONLY | os.O_NOFOLLOW,
                                         dir_fd=layer)
                    with os.fdopen(descriptor, "rb") as handle:
                        cache_id = handle.read(128).decode("ascii", errors="replace").strip()
                    if LAYER_ID.match(cache_id):
                        ids.add(cache_id)
    return ids


def _unnamed_layers(data: int, driver: str, kept: set[str]) -> list[str]:
    """The driver's layer folders that no image layer names, and overlay2's links to them."""
    removed: list[str] = []
    with _opened(data, driver) as store:
        if store is None:
            return removed
        layers = VFS_LAYERS if driver == "vfs" else None
        with _opened(store, layers or ".") as folder:
            if folder is None:
                return removed
            for name in os.listdir(folder):
                if name != LAYER_LINKS and name not in kept and _remove(folder, name):
                    removed.append(f"{driver}/{name}")
            with _opened(folder, LAYER_LINKS) as links:
                if links is not None:
                    for name in os.listdir(links):
                        _unlink_dangling(links, name)
    return removed


def _unlink_dangling(links: int, name: str) -> None:
    """An overlay2 short link whose layer was removed (`l/<id> -> ../<layer>/diff`)."""
    with contextlib.suppress(OSError):
        target = os.readlink(name, dir_fd=links)
        layer = Path(target).parent.name
        if not LAYER_ID.match(layer.removesuffix("-init")):
            os.unlink(name, dir_fd=links)
            return
        try:
            os.stat(Path("..") / layer, dir_fd=links, follow_symlinks=False)
        except FileNotFoundError:
            os.unlink(name, dir_fd=links)
