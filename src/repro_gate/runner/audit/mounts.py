"""Mounts: local volumes whose driver options bind host paths, a checked folder swapped for a
symlink before the mount (to the canary folder, the slot engine's socket, the host's /tmp and
/etc), and binds of the host's own folders. Each reads a canary back, or looks for a path,
through the container archive endpoint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote

from repro_gate.runner.audit.canaries import CANARY_FILE
from repro_gate.runner.audit.engine import Blocked, Finding, Outcome
from repro_gate.runner.audit.steps import (
    Context,
    inside,
    local_volume,
    probe_body,
    read_mount,
    seen,
)
from repro_gate.runner.slot_folders import SlotFolders


def tmpfs_bind_volume(ctx: Context) -> Finding:
    volume = local_volume(ctx, {"type": "tmpfs", "o": "bind,ro",
                                "device": str(ctx.canaries.host_folder)})
    return read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]}, f"/v/{CANARY_FILE}")


def tmpfs_rbind_root(ctx: Context) -> Finding:
    volume = local_volume(ctx, {"type": "tmpfs", "o": "rbind,ro", "device": "/"})
    return read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]},
                      inside("/v", ctx.canaries.host_file))


def none_bind_volume(ctx: Context) -> Finding:
    volume = local_volume(ctx, {"type": "none", "o": "bind,ro",
                                "device": str(ctx.canaries.host_folder)})
    return read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]}, f"/v/{CANARY_FILE}")


def repeated_driver_opts(ctx: Context) -> Finding:
    """The same DriverOpts keys twice in raw JSON: harmless first, the host's folder last."""
    name = ctx.name("volume")
    folder = json.dumps(str(ctx.canaries.host_folder))
    raw = (f'{{"Name": "{name}", "Driver": "local", "DriverOpts": {{"type": "tmpfs", '
           f'"device": "tmpfs", "o": "size=1m", "o": "bind,ro", "device": {folder}}}}}')
    ctx.engine.create_volume(name, raw.encode())
    return read_mount(ctx, {"Binds": [f"{name}:/v:ro"]}, f"/v/{CANARY_FILE}")


def volume_in_create_body(ctx: Context) -> Finding:
    """A mount of a new volume whose driver options (in the create body) bind the canary."""
    name = ctx.name("volume")
    ctx.engine.volumes.append(name)
    options = {"type": "none", "o": "bind,ro", "device": str(ctx.canaries.host_folder)}
    mount = {"Type": "volume", "Source": name, "Target": "/v", "ReadOnly": True,
             "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": options}}}
    return read_mount(ctx, {"Mounts": [mount]}, f"/v/{CANARY_FILE}")


def _swap_for_symlink(folder: Path, target: Path) -> None:
    """Replace the (checked) folder by a symlink, as a job could inside its work folder."""
    shutil.rmtree(folder)
    folder.symlink_to(target)


def bind_then_symlink(ctx: Context) -> Finding:
    folder = ctx.scratch / ctx.name("swap")
    folder.mkdir()
    body = probe_body(ctx, {"Binds": [f"{folder}:/probe:ro"]})
    container = ctx.engine.create(ctx.name("swap"), body)
    _swap_for_symlink(folder, ctx.canaries.host_folder)
    return seen(ctx, ctx.engine.archive(container, f"/probe/{CANARY_FILE}"), "after the swap")


def _swap_reaches(ctx: Context, target: Path, name: str, what: str) -> Finding:
    """Bind a folder of the work folder, swap it for a symlink to `target`, then look for
    `name` through the bind: its presence alone (a HEAD of the archive) tells that `target`
    was mounted, whether or not the slot's user may read it."""
    folder = ctx.scratch / ctx.name("swap")
    folder.mkdir()
    container = ctx.engine.create(ctx.name("swap"),
                                  probe_body(ctx, {"Binds": [f"{folder}:/probe:ro"]}))
    _swap_for_symlink(folder, target)
    path = f"/probe/{name}"
    answer = ctx.engine.request("HEAD", f"/containers/{container}/archive?path={quote(path)}")
    if answer.ok:
        return Finding(Outcome.ESCAPED, f"{what} was mounted: {path} is there after the swap")
    if answer.status == 404 and answer.from_engine:
        return Finding(Outcome.NO_EFFECT, f"created; the folder checked was mounted, not {what}")
    raise Blocked(answer.finding("archive"))


def swap_to_engine_socket(ctx: Context) -> Finding:
    engine = SlotFolders(ctx.target.work_folder.parent)
    return _swap_reaches(ctx, engine.engine_runtime, engine.engine_socket.name,
                         "the slot engine's socket folder")


def swap_to_host_tmp(ctx: Context) -> Finding:
    return _swap_reaches(ctx, Path("/tmp"), ctx.canaries.tmp_file.name, "the host's /tmp")


def swap_to_host_etc(ctx: Context) -> Finding:
    return _swap_reaches(ctx, Path("/etc"), "passwd", "the host's /etc")


def volume_then_symlink(ctx: Context) -> Finding:
    folder = ctx.scratch / ctx.name("swap")
    folder.mkdir()
    volume = local_volume(ctx, {"type": "none", "o": "bind,ro", "device": str(folder)})
    body = probe_body(ctx, {"Binds": [f"{volume}:/v:ro"]})
    container = ctx.engine.create(ctx.name("swap"), body)
    _swap_for_symlink(folder, Path("/"))
    path = inside("/v", ctx.canaries.host_file)
    return seen(ctx, ctx.engine.archive(container, path), "after the swap")


def bind_host_root(ctx: Context) -> Finding:
    return read_mount(ctx, {"Binds": ["/:/host:ro"]}, inside("/host", ctx.canaries.host_file))


def mount_host_root(ctx: Context) -> Finding:
    mount = {"Type": "bind", "Source": "/", "Target": "/host", "ReadOnly": True}
    return read_mount(ctx, {"Mounts": [mount]}, inside("/host", ctx.canaries.host_file))


def bind_host_tmp(ctx: Context) -> Finding:
    return read_mount(ctx, {"Binds": ["/tmp:/t:ro"]}, f"/t/{ctx.canaries.tmp_file.name}")


def bind_canary_folder(ctx: Context) -> Finding:
    return read_mount(ctx, {"Binds": [f"{ctx.canaries.host_folder}:/probe:ro"]},
                      f"/probe/{CANARY_FILE}")
