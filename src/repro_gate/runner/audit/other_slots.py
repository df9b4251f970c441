"""Other slots and leaks: the other slot's container reached by ID, prefix, link, network or
build; its work folder bound; a build's cgroup outside the slot; listings that show the other
slot's containers; URLs on the host's loopback fetched by the engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from repro_gate.runner.audit.engine import Blocked, Finding, Outcome
from repro_gate.runner.audit.steps import (
    Context,
    build_context,
    cat,
    other_container,
    probe_body,
    read_mount,
    run_output,
    seen,
)

RACE_TRIES = 16  # the rename goes first, then the inspect 0, 1, 2 … 15 ms later
RACE_STEP_SECONDS = 0.001


def links_environment(ctx: Context) -> Finding:
    name = ctx.canaries.other.container_name
    output = run_output(ctx, {"NetworkMode": "default", "Links": [f"{name}:canary"]},
                        "export -p")
    return seen(ctx, output, "in the linked environment")


def network_of_other_container(ctx: Context) -> Finding:
    other = other_container(ctx)
    output = run_output(ctx, {"NetworkMode": f"container:{other}"}, cat("/etc/hostname"))
    if other[:12].encode() in output:
        return Finding(Outcome.ESCAPED, "ran in the other slot's container's namespaces")
    return Finding(Outcome.NO_EFFECT, "ran, but not in the other slot's namespaces")


def build_in_other_network(ctx: Context) -> Finding:
    other = other_container(ctx)
    dockerfile = f"FROM {ctx.target.image}\nRUN true\n"
    ctx.engine.build(ctx.name("build"), f"networkmode=container:{quote(other)}",
                     build_context(dockerfile))
    return Finding(Outcome.ESCAPED, "a build step ran in the other slot's network namespace")


def build_cgroup_parent(ctx: Context) -> Finding:
    parent = ctx.name("cgroup")
    dockerfile = f"FROM {ctx.target.image}\nRUN {cat('/proc/self/cgroup')}\n"
    try:
        output = ctx.engine.build(ctx.name("build"), f"cgroupparent={parent}",
                                  build_context(dockerfile))
    finally:
        _remove_cgroup(parent)
    if parent in output:
        return Finding(Outcome.ESCAPED, f"a build step ran in the host cgroup {parent}")
    return Finding(Outcome.NO_EFFECT, "the build ran in a cgroup of the slot's")


def _remove_cgroup(name: str) -> None:
    """The cgroup folders a build's parent left (cgroup v1 controllers, or v2)."""
    for folder in [Path("/sys/fs/cgroup") / name, *Path("/sys/fs/cgroup").glob(f"*/{name}")]:
        if folder.is_dir():
            with contextlib.suppress(OSError):  # still in use: the engine's to remove
                os.rmdir(folder)


def inspect_other_container(ctx: Context) -> Finding:
    answer = ctx.engine.must("inspect", "GET", f"/containers/{other_container(ctx)}/json")
    return seen(ctx, answer.body, "in its inspect answer")


def id_prefix_rename_race(ctx: Context) -> Finding:
    """A container named like the other's ID prefix, renamed while the prefix is inspected."""
    prefix = other_container(ctx)[:12]
    for attempt in range(RACE_TRIES):
        ours = ctx.engine.create(prefix, probe_body(ctx, {}))
        rename = threading.Thread(target=ctx.engine.request, args=(
            "POST", f"/containers/{ours}/rename?name={ctx.name('renamed')}"))
        rename.start()
        time.sleep(RACE_STEP_SECONDS * attempt)
        answer = ctx.engine.request("GET", f"/containers/{prefix}/json")
        rename.join()
        ctx.engine.request("DELETE", f"/containers/{ours}?force=1")
        if answer.ok and (finding := seen(ctx, answer.body, "by its ID prefix")).outcome \
                is Outcome.ESCAPED:
            return Finding(Outcome.ESCAPED, f"{finding.detail} (try {attempt + 1})")
    return Finding(Outcome.NO_EFFECT, f"{RACE_TRIES} tries; the prefix never gave the other's")


def volumes_from_other(ctx: Context) -> Finding:
    """The other slot's container's mounts (its work folder) through VolumesFrom."""
    canary = ctx.canaries.other.file
    assert canary is not None
    host = {"VolumesFrom": [f"{other_container(ctx)}:ro"]}
    return read_mount(ctx, host, str(canary))


def other_work_folder(ctx: Context) -> Finding:
    canary = ctx.canaries.other.file
    assert canary is not None
    return read_mount(ctx, {"Binds": [f"{canary.parent}:/probe:ro"]}, f"/probe/{canary.name}")


def _lists_other(ctx: Context, body: bytes, where: str) -> Finding:
    if other_container(ctx).encode() in body:
        return Finding(Outcome.ESCAPED, f"{where} lists the other slot's container")
    return Finding(Outcome.NO_EFFECT, f"{where} does not list the other slot's container")


def container_list(ctx: Context) -> Finding:
    answer = ctx.engine.must("list", "GET", "/containers/json?all=1")
    return _lists_other(ctx, answer.body, "/containers/json")


def system_df(ctx: Context) -> Finding:
    answer = ctx.engine.must("df", "GET", "/system/df")
    return _lists_other(ctx, answer.body, "/system/df")


def network_inspect(ctx: Context) -> Finding:
    listed = ctx.engine.must("networks", "GET", "/networks")
    bodies = [ctx.engine.request("GET", f"/networks/{quote(str(network['Id']))}").body
              for network in json.loads(listed.body)]
    return _lists_other(ctx, b"".join(bodies), "network inspect")


def _fetched(ctx: Context, token: str, step: Callable[[], object]) -> Finding:
    """Run `step`; ESCAPED when the loopback URL for `token` was fetched, even if the step
    then failed (the engine fetched, then found no image there)."""
    try:
        step()
    except Blocked:
        if not ctx.loopback.hit(token):
            raise
    if ctx.loopback.hit(token):
        return Finding(Outcome.ESCAPED, "the engine fetched a URL on the host's loopback")
    return Finding(Outcome.NO_EFFECT, "the loopback URL was not fetched")


def import_from_url(ctx: Context) -> Finding:
    token = ctx.name("from-src")
    url = quote(ctx.loopback.url(token), safe="")
    return _fetched(ctx, token, lambda: ctx.engine.must(
        "import", "POST", f"/images/create?fromSrc={url}&repo={ctx.name('import')}"))


def build_from_remote(ctx: Context) -> Finding:
    token = ctx.name("remote")
    url = quote(ctx.loopback.url(token), safe="")
    return _fetched(ctx, token, lambda: ctx.engine.build(ctx.name("build"), f"remote={url}",
                                                         b""))


def security_opt_disable(ctx: Context) -> Finding:
    ctx.engine.create(ctx.name("secopt"), probe_body(ctx, {"SecurityOpt": ["disable"]}))
    return Finding(Outcome.NO_EFFECT, "accepted: it turns SELinux labels off (nothing to "
                                      "reach where SELinux is not on)")
