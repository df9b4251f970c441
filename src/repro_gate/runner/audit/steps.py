"""What every attempt of `runner audit` is made of: the target, the run's context, the row of
the table, and the steps attempts share (a probe container, reading through its mounts, a
command's output, a local volume, a build context).

An attempt does what a hostile job would do on its Docker socket and then checks the effect
for real: a canary's secret read back through the container archive endpoint (which mounts a
created container's binds and volumes as a start would), a command's output in a finished
container, the loopback server's record, or another slot's container in an answer. It returns
its Finding, or raises Blocked when the filter or the engine refused a step on the way. Every
host path is asked for read-only: an attempt that gets out reads, it never writes.
"""

from __future__ import annotations

import io
import itertools
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro_gate.runner.audit.canaries import Canaries, Loopback
from repro_gate.runner.audit.engine import Engine, Finding, Outcome

OUTPUT = "/tmp/repro-gate-audit.out"  # in the container: a command's output, read back


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


def probe_body(ctx: Context, host: dict[str, Any], script: str = "true",
               **config: Any) -> dict[str, Any]:
    """A create body from the audit image: `script` run by /bin/sh, no network by default."""
    return {"Image": ctx.target.image, "Cmd": ["/bin/sh", "-c", script], **config,
            "HostConfig": {"NetworkMode": "none", **host}}


def seen(ctx: Context, data: bytes | None, how: str) -> Finding:
    """ESCAPED when `data` holds a canary's secret."""
    if data is not None and (which := ctx.canaries.which(data)):
        return Finding(Outcome.ESCAPED, f"read the {which} canary {how}")
    return Finding(Outcome.NO_EFFECT, f"created; no canary {how}")


def read_mount(ctx: Context, host: dict[str, Any], path: str) -> Finding:
    """Create a container with `host` settings and read `path` through its mounts."""
    container = ctx.engine.create(ctx.name("mount"), probe_body(ctx, host))
    return seen(ctx, ctx.engine.archive(container, path), f"at {path}")


def cat(path: str) -> str:
    """A shell loop printing a file with builtins only (the image may have no `cat`)."""
    return (f'while IFS= read -r l || [ -n "$l" ]; do printf "%s\\n" "$l"; '
            f"done < {path}")


def run_output(ctx: Context, host: dict[str, Any], script: str, **config: Any) -> bytes:
    """Run `script` in a container; what it printed."""
    body = probe_body(ctx, host, f"{{ {script}; }} > {OUTPUT} 2>&1", **config)
    container = ctx.engine.run(ctx.name("run"), body)
    return ctx.engine.archive(container, OUTPUT) or b""


def local_volume(ctx: Context, options: dict[str, str]) -> str:
    """A local volume with driver options; its name."""
    name = ctx.name("volume")
    body = {"Name": name, "Driver": "local", "DriverOpts": options}
    ctx.engine.create_volume(name, json.dumps(body).encode())
    return name


def inside(mount: str, host_path: Path) -> str:
    """Where the host's `host_path` is in a container that has the host's / at `mount`."""
    return f"{mount}{host_path}"


def build_context(dockerfile: str) -> bytes:
    """A build context holding only a Dockerfile."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def other_container(ctx: Context) -> str:
    container = ctx.canaries.other.container
    assert container is not None  # needs_other_slot
    return container
