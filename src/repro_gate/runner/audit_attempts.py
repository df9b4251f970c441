"""The escape attempts of `runner audit`, one small function each, in one table (`ATTEMPTS`).

Each attempt does what a hostile job would do on its Docker socket and then checks the effect
for real: a canary's secret read back through the container archive endpoint (which mounts a
created container's binds and volumes as a start would), a command's output in a finished
container, the loopback server's record, or another slot's container in an answer. An attempt
returns its Finding, or raises Blocked when the filter or the engine refused a step on the way.
Every host path is asked for read-only: an attempt that gets out reads, it never writes.
docs/runner-threat-model.md ("What runner audit tries") describes each one.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import shutil
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repro_gate.runner.audit_canaries import CANARY_FILE, Canaries, Loopback
from repro_gate.runner.audit_engine import Blocked, Engine, Finding, Outcome, exchange

OUTPUT = "/tmp/repro-gate-audit.out"  # in the container: a command's output, read back
RACE_TRIES = 16  # the rename goes first, then the inspect 0, 1, 2 … 15 ms later
RACE_STEP_SECONDS = 0.001
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
CAP_SYS_ADMIN = 21
LF, CRLF = "\n", "\r\n"
HOST_ROOT_MAP = re.compile(r"^\s*0\s+0\s+4294967295\s*$", re.MULTILINE)


@dataclass(frozen=True)
class AuditTarget:
    """What a job on one slot gets, and where the other slot's canaries go."""

    endpoint: Path  # the Unix socket a job on the slot gets (its DOCKER_HOST)
    work_folder: Path  # the slot's work folder on the host: binds inside it are legitimate
    gpu_uuid: str  # the slot's GPU
    other_gpu_uuid: str  # a GPU the slot must not get
    other_endpoint: Path | None  # another slot's endpoint; None with one slot
    other_work_folder: Path | None  # another slot's work folder
    image: str  # an image in the slot's engine (and the other's) with a POSIX /bin/sh


@dataclass
class Context:
    """One audit run: the slot's engine, the canaries, and names unique to this run."""

    engine: Engine
    target: AuditTarget
    canaries: Canaries
    loopback: Loopback
    scratch: Path  # a folder of the audit's inside the slot's work folder
    prefix: str
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def name(self, what: str) -> str:
        """A container, volume or image name unique to this run."""
        return f"{self.prefix}{what}-{next(self.counter)}"


Run = Callable[[Context], Finding]


@dataclass(frozen=True)
class Attempt:
    """One row of the table: its class, what it tries, the function that tries it."""

    klass: str
    name: str
    run: Run
    needs_other_slot: bool = False


# -- shared steps ---------------------------------------------------------------------------


def _body(ctx: Context, host: dict[str, Any], script: str = "true",
          **config: Any) -> dict[str, Any]:
    """A create body from the audit image: `script` run by /bin/sh, no network by default."""
    return {"Image": ctx.target.image, "Cmd": ["/bin/sh", "-c", script], **config,
            "HostConfig": {"NetworkMode": "none", **host}}


def _seen(ctx: Context, data: bytes | None, how: str) -> Finding:
    """ESCAPED when `data` holds a canary's secret."""
    if data is not None and (which := ctx.canaries.which(data)):
        return Finding(Outcome.ESCAPED, f"read the {which} canary {how}")
    return Finding(Outcome.NO_EFFECT, f"created; no canary {how}")


def _read_mount(ctx: Context, host: dict[str, Any], path: str) -> Finding:
    """Create a container with `host` settings and read `path` through its mounts."""
    container = ctx.engine.create(ctx.name("mount"), _body(ctx, host))
    return _seen(ctx, ctx.engine.archive(container, path), f"at {path}")


def _cat(path: str) -> str:
    """A shell loop printing a file with builtins only (the image may have no `cat`)."""
    return (f'while IFS= read -r l || [ -n "$l" ]; do printf "%s\\n" "$l"; '
            f"done < {path}")


def _run_output(ctx: Context, host: dict[str, Any], script: str, **config: Any) -> bytes:
    """Run `script` in a container; what it printed."""
    body = _body(ctx, host, f"{{ {script}; }} > {OUTPUT} 2>&1", **config)
    container = ctx.engine.run(ctx.name("run"), body)
    return ctx.engine.archive(container, OUTPUT) or b""


def _volume(ctx: Context, options: dict[str, str]) -> str:
    """A local volume with driver options; its name."""
    name = ctx.name("volume")
    body = {"Name": name, "Driver": "local", "DriverOpts": options}
    ctx.engine.create_volume(name, json.dumps(body).encode())
    return name


def _inside(mount: str, host_path: Path) -> str:
    """Where the host's `host_path` is in a container that has the host's / at `mount`."""
    return f"{mount}{host_path}"


def _context(dockerfile: str) -> bytes:
    """A build context holding only a Dockerfile."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _other_container(ctx: Context) -> str:
    container = ctx.canaries.other.container
    assert container is not None  # needs_other_slot
    return container


# -- request framing ------------------------------------------------------------------------


def _import_request(ctx: Context, token: str, newline: str) -> str:
    """A body-less request that makes the engine fetch the loopback URL for `token`."""
    url = quote(ctx.loopback.url(token), safe="")
    return (f"POST /images/create?fromSrc={url}&repo={ctx.name('import')} HTTP/1.1{newline}"
            f"Host: docker{newline}")


def _framing(ctx: Context, token: str, received: bytes, expected: int) -> Finding:
    """What came of a smuggled request: the loopback hit, or who answered."""
    if ctx.loopback.hit(token):
        return Finding(Outcome.ESCAPED, "the smuggled request reached the engine and it "
                                        "fetched a URL on the host's loopback")
    finals = [s for s in re.findall(rb"HTTP/1\.[01] (\d{3})", received) if s[:1] != b"1"]
    if not finals or b"api-version" not in received.lower():
        first = finals[0].decode() if finals else "nothing"
        return Finding(Outcome.REFUSED_BY_FILTER, f"the endpoint answered {first}")
    if len(finals) >= expected:
        return Finding(Outcome.STOPPED_BY_ENGINE, "the engine answered the smuggled request; "
                                                  "it fetched nothing")
    return Finding(Outcome.NO_EFFECT, f"{len(finals)} answer(s); the smuggled request was "
                                      "not served")


def bare_lf_smuggling(ctx: Context) -> Finding:
    """A header value ending in a bare-LF blank line, then a second request."""
    token = ctx.name("bare-lf")
    data = (f"GET /_ping HTTP/1.1\r\nHost: docker\r\nX-Audit: 1\n\n"
            f"{_import_request(ctx, token, LF)}\r\n\r\n").encode()
    return _framing(ctx, token, exchange(ctx.target.endpoint, [data]), 2)


def expect_then_head(ctx: Context) -> Finding:
    """`Expect: 100-continue` on a create, then a HEAD, then a raw request."""
    token, name = ctx.name("expect"), ctx.name("expect")
    ctx.engine.containers.append(name)
    body = json.dumps({"Image": ctx.target.image, "HostConfig": {"NetworkMode": "none"}})
    parts = [
        (f"POST /containers/create?name={name} HTTP/1.1\r\nHost: docker\r\n"
         f"Content-Type: application/json\r\nExpect: 100-continue\r\n"
         f"Content-Length: {len(body)}\r\n\r\n{body}").encode(),
        b"HEAD /_ping HTTP/1.1\r\nHost: docker\r\n\r\n",
        f"{_import_request(ctx, token, CRLF)}\r\n".encode(),
    ]
    return _framing(ctx, token, exchange(ctx.target.endpoint, parts), 3)


# -- volumes --------------------------------------------------------------------------------


def tmpfs_bind_volume(ctx: Context) -> Finding:
    volume = _volume(ctx, {"type": "tmpfs", "o": "bind,ro",
                           "device": str(ctx.canaries.host_folder)})
    return _read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]}, f"/v/{CANARY_FILE}")


def tmpfs_rbind_root(ctx: Context) -> Finding:
    volume = _volume(ctx, {"type": "tmpfs", "o": "rbind,ro", "device": "/"})
    return _read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]},
                       _inside("/v", ctx.canaries.host_file))


def none_bind_volume(ctx: Context) -> Finding:
    volume = _volume(ctx, {"type": "none", "o": "bind,ro",
                           "device": str(ctx.canaries.host_folder)})
    return _read_mount(ctx, {"Binds": [f"{volume}:/v:ro"]}, f"/v/{CANARY_FILE}")


def repeated_driver_opts(ctx: Context) -> Finding:
    """The same DriverOpts keys twice in raw JSON: harmless first, the host's folder last."""
    name = ctx.name("volume")
    folder = json.dumps(str(ctx.canaries.host_folder))
    raw = (f'{{"Name": "{name}", "Driver": "local", "DriverOpts": {{"type": "tmpfs", '
           f'"device": "tmpfs", "o": "size=1m", "o": "bind,ro", "device": {folder}}}}}')
    ctx.engine.create_volume(name, raw.encode())
    return _read_mount(ctx, {"Binds": [f"{name}:/v:ro"]}, f"/v/{CANARY_FILE}")


def volume_in_create_body(ctx: Context) -> Finding:
    """A mount of a new volume whose driver options (in the create body) bind the canary."""
    name = ctx.name("volume")
    ctx.engine.volumes.append(name)
    options = {"type": "none", "o": "bind,ro", "device": str(ctx.canaries.host_folder)}
    mount = {"Type": "volume", "Source": name, "Target": "/v", "ReadOnly": True,
             "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": options}}}
    return _read_mount(ctx, {"Mounts": [mount]}, f"/v/{CANARY_FILE}")


# -- check, then mount ----------------------------------------------------------------------


def _swap_for_symlink(folder: Path, target: Path) -> None:
    """Replace the (checked) folder by a symlink, as a job could inside its work folder."""
    shutil.rmtree(folder)
    folder.symlink_to(target)


def bind_then_symlink(ctx: Context) -> Finding:
    folder = ctx.scratch / ctx.name("swap")
    folder.mkdir()
    body = _body(ctx, {"Binds": [f"{folder}:/probe:ro"]})
    container = ctx.engine.create(ctx.name("swap"), body)
    _swap_for_symlink(folder, ctx.canaries.host_folder)
    return _seen(ctx, ctx.engine.archive(container, f"/probe/{CANARY_FILE}"), "after the swap")


def volume_then_symlink(ctx: Context) -> Finding:
    folder = ctx.scratch / ctx.name("swap")
    folder.mkdir()
    volume = _volume(ctx, {"type": "none", "o": "bind,ro", "device": str(folder)})
    body = _body(ctx, {"Binds": [f"{volume}:/v:ro"]})
    container = ctx.engine.create(ctx.name("swap"), body)
    _swap_for_symlink(folder, Path("/"))
    path = _inside("/v", ctx.canaries.host_file)
    return _seen(ctx, ctx.engine.archive(container, path), "after the swap")


# -- other slots ----------------------------------------------------------------------------


def links_environment(ctx: Context) -> Finding:
    name = ctx.canaries.other.container_name
    output = _run_output(ctx, {"NetworkMode": "default", "Links": [f"{name}:canary"]},
                         "export -p")
    return _seen(ctx, output, "in the linked environment")


def network_of_other_container(ctx: Context) -> Finding:
    other = _other_container(ctx)
    output = _run_output(ctx, {"NetworkMode": f"container:{other}"}, _cat("/etc/hostname"))
    if other[:12].encode() in output:
        return Finding(Outcome.ESCAPED, "ran in the other slot's container's namespaces")
    return Finding(Outcome.NO_EFFECT, "ran, but not in the other slot's namespaces")


def build_in_other_network(ctx: Context) -> Finding:
    other = _other_container(ctx)
    dockerfile = f"FROM {ctx.target.image}\nRUN true\n"
    ctx.engine.build(ctx.name("build"), f"networkmode=container:{quote(other)}",
                     _context(dockerfile))
    return Finding(Outcome.ESCAPED, "a build step ran in the other slot's network namespace")


def build_cgroup_parent(ctx: Context) -> Finding:
    parent = ctx.name("cgroup")
    dockerfile = f"FROM {ctx.target.image}\nRUN {_cat('/proc/self/cgroup')}\n"
    try:
        output = ctx.engine.build(ctx.name("build"), f"cgroupparent={parent}",
                                  _context(dockerfile))
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
    answer = ctx.engine.must("inspect", "GET", f"/containers/{_other_container(ctx)}/json")
    return _seen(ctx, answer.body, "in its inspect answer")


def id_prefix_rename_race(ctx: Context) -> Finding:
    """A container named like the other's ID prefix, renamed while the prefix is inspected."""
    prefix = _other_container(ctx)[:12]
    for attempt in range(RACE_TRIES):
        ours = ctx.engine.create(prefix, _body(ctx, {}))
        rename = threading.Thread(target=ctx.engine.request, args=(
            "POST", f"/containers/{ours}/rename?name={ctx.name('renamed')}"))
        rename.start()
        time.sleep(RACE_STEP_SECONDS * attempt)
        answer = ctx.engine.request("GET", f"/containers/{prefix}/json")
        rename.join()
        ctx.engine.request("DELETE", f"/containers/{ours}?force=1")
        if answer.ok and (finding := _seen(ctx, answer.body, "by its ID prefix")).outcome \
                is Outcome.ESCAPED:
            return Finding(Outcome.ESCAPED, f"{finding.detail} (try {attempt + 1})")
    return Finding(Outcome.NO_EFFECT, f"{RACE_TRIES} tries; the prefix never gave the other's")


def other_work_folder(ctx: Context) -> Finding:
    canary = ctx.canaries.other.file
    assert canary is not None
    return _read_mount(ctx, {"Binds": [f"{canary.parent}:/probe:ro"]}, f"/probe/{canary.name}")


# -- leaks ----------------------------------------------------------------------------------


def _lists_other(ctx: Context, body: bytes, where: str) -> Finding:
    if _other_container(ctx).encode() in body:
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
    ctx.engine.create(ctx.name("secopt"), _body(ctx, {"SecurityOpt": ["disable"]}))
    return Finding(Outcome.NO_EFFECT, "accepted: it turns SELinux labels off (nothing to "
                                      "reach where SELinux is not on)")


# -- the host -------------------------------------------------------------------------------


def bind_host_root(ctx: Context) -> Finding:
    return _read_mount(ctx, {"Binds": ["/:/host:ro"]}, _inside("/host", ctx.canaries.host_file))


def mount_host_root(ctx: Context) -> Finding:
    mount = {"Type": "bind", "Source": "/", "Target": "/host", "ReadOnly": True}
    return _read_mount(ctx, {"Mounts": [mount]}, _inside("/host", ctx.canaries.host_file))


def bind_host_tmp(ctx: Context) -> Finding:
    return _read_mount(ctx, {"Binds": ["/tmp:/t:ro"]}, f"/t/{ctx.canaries.tmp_file.name}")


def bind_canary_folder(ctx: Context) -> Finding:
    return _read_mount(ctx, {"Binds": [f"{ctx.canaries.host_folder}:/probe:ro"]},
                       f"/probe/{CANARY_FILE}")


def privileged(ctx: Context) -> Finding:
    """Privileged: the host's root with every capability, or only a user namespace's."""
    output = _run_output(ctx, {"Privileged": True},
                         f"{_cat('/proc/self/uid_map')}; {_cat('/proc/self/status')}")
    text = output.decode("utf-8", "replace")
    found = re.search(r"^CapEff:\s*([0-9a-f]+)", text, re.MULTILINE)
    admin = bool(found and int(found.group(1), 16) >> CAP_SYS_ADMIN & 1)
    if admin and HOST_ROOT_MAP.search(text):
        return Finding(Outcome.ESCAPED, "ran as the host's root with CAP_SYS_ADMIN")
    return Finding(Outcome.NO_EFFECT, "ran, but not as the host's root")


# -- GPUs -----------------------------------------------------------------------------------


def _gpu_request(ctx: Context, request: dict[str, Any]) -> Finding:
    device = {"Driver": "nvidia", "Capabilities": [["gpu"]], **request}
    output = _run_output(ctx, {"DeviceRequests": [device]}, "export -p").decode()
    found = re.search(r"NVIDIA_VISIBLE_DEVICES='?([^'\n]*)", output)
    granted = found.group(1) if found else ""
    if granted and granted not in ("void", "none", ctx.target.gpu_uuid):
        return Finding(Outcome.ESCAPED, f"started with NVIDIA_VISIBLE_DEVICES={granted}")
    return Finding(Outcome.NO_EFFECT, f"started with NVIDIA_VISIBLE_DEVICES={granted!r}")


def other_gpu_by_uuid(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"DeviceIDs": [ctx.target.other_gpu_uuid]})


def all_gpus(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"DeviceIDs": ["all"]})


def gpu_count_all(ctx: Context) -> Finding:
    return _gpu_request(ctx, {"Count": -1})


def device_node(uuid: str) -> Path | None:
    """The /dev/nvidiaN of the GPU `uuid` on this host, from the NVIDIA driver's /proc files."""
    for information in sorted(NVIDIA_PROC.glob("*/information")):
        text = information.read_text(encoding="utf-8", errors="replace")
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.MULTILINE)
        if uuid in text and minor:
            return Path(f"/dev/nvidia{minor.group(1)}")
    return None


def other_gpu_device(ctx: Context) -> Finding:
    node = device_node(ctx.target.other_gpu_uuid)
    if node is None:
        return Finding(Outcome.NOT_RUN, "no NVIDIA device node of the other GPU on this host")
    devices = [{"PathOnHost": str(node), "PathInContainer": str(node),
                "CgroupPermissions": "rw"}]
    output = _run_output(ctx, {"Devices": devices}, f"[ -c {node} ] && echo present")
    if b"present" in output:
        return Finding(Outcome.ESCAPED, f"{node} is in the container")
    return Finding(Outcome.NO_EFFECT, f"{node} is not in the container")


ATTEMPTS: tuple[Attempt, ...] = (
    Attempt("framing", "bare-LF second request in a header", bare_lf_smuggling),
    Attempt("framing", "Expect: 100-continue, then HEAD, then raw", expect_then_head),
    Attempt("volumes", "local volume type=tmpfs o=bind device=canary", tmpfs_bind_volume),
    Attempt("volumes", "local volume type=tmpfs o=rbind device=/", tmpfs_rbind_root),
    Attempt("volumes", "local volume type=none o=bind device=canary", none_bind_volume),
    Attempt("volumes", "repeated DriverOpts keys in raw JSON", repeated_driver_opts),
    Attempt("volumes", "volume driver options in a create body", volume_in_create_body),
    Attempt("check-then-mount", "bind a work folder dir, swap it for a symlink",
            bind_then_symlink),
    Attempt("check-then-mount", "bind-backed volume, swap its dir for a symlink to /",
            volume_then_symlink),
    Attempt("other slots", "inspect the other slot's container", inspect_other_container, True),
    Attempt("other slots", "HostConfig.Links to the other slot's container",
            links_environment, True),
    Attempt("other slots", "NetworkMode container:<other>", network_of_other_container, True),
    Attempt("other slots", "/build?networkmode=container:<other>", build_in_other_network,
            True),
    Attempt("other slots", "ID-prefix name and rename race", id_prefix_rename_race, True),
    Attempt("other slots", "bind the other slot's work folder", other_work_folder, True),
    Attempt("other slots", "/build?cgroupparent=<outside the slot>", build_cgroup_parent),
    Attempt("leaks", "list all containers", container_list, True),
    Attempt("leaks", "/system/df", system_df, True),
    Attempt("leaks", "network inspect", network_inspect, True),
    Attempt("leaks", "images/create fromSrc=<loopback URL>", import_from_url),
    Attempt("leaks", "/build?remote=<loopback URL>", build_from_remote),
    Attempt("leaks", 'SecurityOpt ["disable"]', security_opt_disable),
    Attempt("host", "bind /", bind_host_root),
    Attempt("host", "Mounts type=bind Source=/", mount_host_root),
    Attempt("host", "bind the host's /tmp", bind_host_tmp),
    Attempt("host", "bind the canary folder", bind_canary_folder),
    Attempt("host", "Privileged", privileged),
    Attempt("gpu", "DeviceRequests for the other GPU's UUID", other_gpu_by_uuid),
    Attempt("gpu", 'DeviceRequests DeviceIDs ["all"]', all_gpus),
    Attempt("gpu", "DeviceRequests Count -1", gpu_count_all),
    Attempt("gpu", "Devices: the other GPU's /dev/nvidiaN", other_gpu_device),
)
