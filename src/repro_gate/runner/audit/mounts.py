"""Mounts: local volumes whose driver options bind host paths, a checked folder swapped for a
symlink before the mount, and binds of the host's own folders. Each reads a canary back
through the container archive endpoint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from repro_gate.runner.audit.canaries import CANARY_FILE
from repro_gate.runner.audit.engine import Finding
from repro_gate.runner.audit.steps import (
    Context,
    inside,
    local_volume,
    probe_body,
    read_mount,
    seen,
)


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
