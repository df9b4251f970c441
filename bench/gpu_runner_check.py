"""GPU check of the runner service: slots, host health, one GPU per slot, the hook, and (rootless)
the kernel's boundary between slots.

On a GPU host with the NVIDIA driver, Docker and the NVIDIA Container Toolkit, it does what the
service does for each slot, without GitHub:

1. discovers the slots through NVML (`runner.slots`; one per GPU, or per MIG instance with
   --mig) and runs the service's host health check (`runner.health.check_slot`) on each;
2. `--engine rootless` (the default, as runner.yml's `isolation.engine`): sets the host up as
   `repro-gate runner setup` does (`runner.host_setup.set_up` on a generated runner.yml: a user
   `rgcheck-slot<N>` per slot with its own subordinate IDs, private folders under a fresh work
   root in /tmp, each GPU's /dev/nvidiaN given to its slot's group, mode 0660; the nodes' owner
   and mode are put back at the end), then per slot brings up what a job gets
   (`runner.slot_endpoint.SlotEndpoint`: the slot's rootless engine under its user, the filter
   in front of it) and starts the slot's container through the filter's socket;
   `--engine shared`: starts it on the Docker daemon at --docker-url, as before the rootless
   engines. Either way with the service's device request, `DeviceRequest(driver="nvidia",
   device_ids=[<slot uuid>], capabilities=[["gpu"]])`, and the hook and status folders mounted
   where the service mounts them (rootless: from the slot's work folder, the only place the
   filter lets a job mount). The image is loaded from the daemon at --docker-url when it has it,
   pulled otherwise;
3. runs `nvidia-smi -L` in it (the NVIDIA runtime hook mounts nvidia-smi, so a CUDA-less image
   will do): it must list exactly that slot's UUID (and, for a MIG slot, its parent GPU);
4. runs the job-started hook in that container as the runner would, with the slot's own UUID
   (it must accept, write REPRO_GATE_GPUS=<uuid> to $GITHUB_ENV and leave an `accepted` status)
   and with another slot's UUID (a made-up one on a one-GPU host: it must refuse and leave a
   `refused` status);
5. rootless only: the container's process runs as the slot's user on the host (its /proc
   entry); a device request for another GPU through the filter is refused (403); and with the
   filter bypassed (a container created on the slot's engine's own socket, the node bind-mounted
   straight in) opening another slot's /dev/nvidiaM fails with EACCES, while the slot's own
   node opens (the control). On a one-GPU host, or between MIG instances of one GPU (they share
   a node), there is no other node: that check is listed under `not_checked`.

Prints one JSON object (`slots`, `checks`, `not_checked`). Exit codes: 0 every check holds; 1 a
check failed; 2 Docker or the host set-up failed (one line on stderr); 3 NVML does not answer
here (one line on stderr, nothing run); 4 bad arguments.
Usage: python bench/gpu_runner_check.py [--engine rootless|shared] [--image python:3.12-slim]
       [--mig] [--docker-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from repro_gate.errors import ConfigError, ReproGateError, one_line
from repro_gate.runner import hook
from repro_gate.runner.health import HealthReport, check_slot
from repro_gate.runner.runner_config import (
    DEFAULT_DOCKER_URL,
    HealthSettings,
    RunnerConfig,
    SlotSettings,
    SlotSource,
    load_runner_config,
)
from repro_gate.runner.slot_identity import SlotIdentity
from repro_gate.runner.slots import Raw, Slot, read_devices, slots_from_raw

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_NO_GPU, EXIT_USAGE = 0, 1, 2, 3, 4
DEFAULT_IMAGE = "python:3.12-slim"  # python3 for the hook; nvidia-smi comes from the runtime
OUTSIDER = "GPU-00000000-0000-4000-8000-000000000000"  # "another slot" on a one-GPU host
CHECK_LABEL = "org.repro-gate.gpu-check"  # not the service's labels: its clean-up leaves it be
KEEP_ALIVE = "import time; time.sleep(3600)"  # the image needs no coreutils
LISTED_UUID = re.compile(r"UUID: ((?:GPU|MIG)-[0-9A-Fa-f-]+)")
API_VERSION = "1.41"
# Rootless: the check's own slot users and IDs, apart from the service's defaults.
USER_PREFIX = "rgcheck-slot"
SUBORDINATE_BASE = 1_800_000_000
PLACEHOLDER_IMAGE = "ghcr.io/actions/actions-runner@sha256:" + "0" * 64  # never pulled
FORBIDDEN = 403  # the filter's answer to a request it refuses
# Opens a device node; prints `opened` or the error.
OPEN_NODE = """
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
    print("opened")
except OSError as error:
    print(error)
"""


class CheckError(Exception):
    """Docker could not do what the check needs: exit EXIT_ERROR with this one line."""


@dataclass(frozen=True)
class HookRun:
    uuid: str  # the REPRO_GATE_SLOT_UUID it ran with
    exit_code: int
    github_env: str
    status: hook.HookStatus | None
    output: str


@dataclass(frozen=True)
class Boundary:
    """What the kernel and the filter hold for one rootless slot."""

    user: str
    slot_uid: int
    process_uid: int | None  # the slot container's process, on the host; None: not found
    other_gpu_request_status: int | None  # the filter's answer; None: it was let through
    own_node: str | None  # /dev/nvidiaN of the slot's GPU (None: NVML gave no minor)
    own_node_result: str | None  # what opening it said, from a container of the slot
    other_node: str | None  # another slot's node; None: there is none (one GPU, MIG siblings)
    other_node_result: str | None

    def runs_as_slot_user(self) -> bool:
        return self.process_uid == self.slot_uid

    def other_gpu_refused(self) -> bool:
        return self.other_gpu_request_status == FORBIDDEN

    def other_node_refused(self) -> bool | None:
        if self.other_node is None:
            return None
        said = (self.other_node_result or "").lower()
        return "errno 13" in said or "permission denied" in said

    def own_node_opens(self) -> bool | None:
        return None if self.own_node is None else self.own_node_result == "opened"


@dataclass(frozen=True)
class SlotCheck:
    slot: Slot
    health: HealthReport
    health_seconds: float
    listed: list[str]  # the UUIDs `nvidia-smi -L` printed in the slot's container
    own: HookRun
    other: HookRun
    boundary: Boundary | None  # rootless only

    def exclusive(self) -> bool:
        expected = {self.slot.uuid, *([self.slot.parent_uuid] if self.slot.parent_uuid else [])}
        return sorted(self.listed) == sorted(expected)

    def accepted(self) -> bool:
        return (self.own.exit_code == 0
                and self.own.status == hook.HookStatus(hook.HookOutcome.ACCEPTED, self.slot.uuid)
                and self.own.github_env == f"REPRO_GATE_GPUS={self.slot.uuid}\n")

    def refused(self) -> bool:
        status = self.other.status
        return (self.other.exit_code == 1 and self.other.github_env == ""
                and status is not None and status.outcome is hook.HookOutcome.REFUSED)


@dataclass(frozen=True)
class Where:
    """Where a slot's container runs and what it mounts."""

    client: Any  # the docker client the container is created with
    hook_dir: Path
    status_dir: Path


def discover(source: SlotSource) -> tuple[list[Slot], Raw]:
    """This host's slots and NVML's raw answer; exits EXIT_NO_GPU with one line where NVML
    does not answer."""
    raw = read_devices()
    try:
        if "error" in raw:
            raise ConfigError(raw["error"])
        return slots_from_raw(raw, SlotSettings(source)), raw
    except ConfigError as error:
        print(f"gpu_runner_check: no GPU here: {error}: nothing was run", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)


def device_nodes(slots: list[Slot], raw: Raw) -> dict[str, str]:
    """Slot UUID -> /dev/nvidiaN of its GPU (a MIG slot: its parent's), where NVML gave N."""
    minors = {device.get("uuid"): device.get("minor") for device in raw.get("devices") or []}
    nodes = {}
    for slot in slots:
        minor = minors.get(slot.parent_uuid or slot.uuid)
        if isinstance(minor, int):
            nodes[slot.uuid] = f"/dev/nvidia{minor}"
    return nodes


def run_in(container: Any, command: list[str], environment: dict[str, str] | None = None
           ) -> tuple[int, str]:
    exit_code, output = container.exec_run(command, environment=environment or {})
    return int(exit_code), output.decode("utf-8", errors="replace")


def run_hook(container: Any, slot: Slot, uuid: str, status_dir: Path, name: str) -> HookRun:
    """The installed hook as the runner runs it, with `uuid` as the slot's UUID."""
    (status_dir / hook.STATUS_FILE).unlink(missing_ok=True)  # the service clears it per job
    # $GITHUB_ENV in the mounted status folder, so it is read here without tools in the image.
    github_env = status_dir / f"github_env_{name}"
    environment = {**hook.runner_environment(Slot(slot.index, uuid, slot.model)),
                   "GITHUB_ENV": f"{hook.CONTAINER_STATUS_DIR}/{github_env.name}"}
    exit_code, output = run_in(container, ["sh", environment[hook.HOOK_VARIABLE]], environment)
    written = github_env.read_text(encoding="utf-8") if github_env.exists() else ""
    return HookRun(uuid, exit_code, written, hook.read_status(status_dir), output.strip())


def device_request(uuid: str) -> Any:
    from docker.types import DeviceRequest  # docker is a dependency of the runner service

    return DeviceRequest(driver="nvidia", device_ids=[uuid], capabilities=[["gpu"]])


@contextmanager
def slot_container(where: Where, image: str, slot: Slot, marker: str) -> Iterator[Any]:
    """The slot's container, kept alive with `marker` on its command line, removed after."""
    container = where.client.containers.run(
        image, ["python3", "-c", KEEP_ALIVE, marker], detach=True, network_mode="none",
        device_requests=[device_request(slot.uuid)],
        volumes={str(where.hook_dir): {"bind": hook.CONTAINER_HOOK_DIR, "mode": "ro"},
                 str(where.status_dir): {"bind": hook.CONTAINER_STATUS_DIR, "mode": "rw"}},
        labels={CHECK_LABEL: slot.uuid})
    try:
        yield container
    finally:
        container.remove(force=True)


def check(where: Where, image: str, slot: Slot, other_uuid: str,
          boundary: Callable[[str], Boundary] | None = None) -> SlotCheck:
    """Health, then the slot's container: its GPU listing and the hook both ways; with
    `boundary(container marker)` (rootless), what holds between the slots too."""
    started = time.monotonic()
    health = check_slot(slot, HealthSettings(), wait_for_processes=False)
    health_seconds = round(time.monotonic() - started, 3)
    marker = f"gpu-runner-check-{secrets.token_hex(8)}"
    with slot_container(where, image, slot, marker) as container:
        exit_code, listing = run_in(container, ["nvidia-smi", "-L"])
        if exit_code != 0:
            raise CheckError(f"nvidia-smi -L exited {exit_code} in the container of slot"
                             f" {slot.index}: {one_line(listing)}")
        return SlotCheck(slot, health, health_seconds, LISTED_UUID.findall(listing),
                         run_hook(container, slot, slot.uuid, where.status_dir, "own"),
                         run_hook(container, slot, other_uuid, where.status_dir, "other"),
                         boundary(marker) if boundary else None)


def process_uid(marker: str) -> int | None:
    """The host uid of the process whose command line holds `marker`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if marker.encode() not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            for line in Path(f"/proc/{entry}/status").read_text(encoding="utf-8").splitlines():
                if line.startswith("Uid:"):
                    return int(line.split()[1])
        except OSError:  # gone meanwhile
            continue
    return None


def refused_status(client: Any, image: str, uuid: str) -> int | None:
    """The status of a create with a device request for `uuid`; None when it was created."""
    import docker.errors

    try:
        created = client.containers.create(image, ["true"], network_mode="none",
                                           device_requests=[device_request(uuid)])
    except docker.errors.APIError as error:
        return int(error.status_code or 0)
    created.remove(force=True)
    return None


def open_node(engine: Any, image: str, node: str) -> str:
    """What opening `node` says in a container of the slot's engine, created on the engine's
    own socket (past the filter) with the node bind-mounted straight in."""
    import docker.errors

    try:
        container = engine.containers.create(
            image, ["python3", "-c", OPEN_NODE, node], network_mode="none",
            volumes={node: {"bind": node, "mode": "rw"}})
    except docker.errors.APIError as error:  # the engine itself refused the mount
        return one_line(error.explanation or str(error))
    try:
        container.start()
        container.wait(timeout=60)
        return str(container.logs().decode(errors="replace").strip())
    finally:
        container.remove(force=True)


def measure_boundary(marker: str, *, identity: SlotIdentity, job: Any, engine: Any, image: str,
                     other: str, own_node: str | None, other_node: str | None) -> Boundary:
    """What holds for a slot whose container runs with `marker` on its command line: `job` is
    a client of the slot's filter, `engine` of its engine's own socket."""
    return Boundary(
        identity.user, identity.owner().uid, process_uid(marker),
        refused_status(job, image, other),
        own_node, open_node(engine, image, own_node) if own_node else None,
        other_node, open_node(engine, image, other_node) if other_node else None)


def report(checks: list[SlotCheck]) -> dict[str, Any]:
    slots = []
    for c in checks:
        entry = {**asdict(c), "exclusive": c.exclusive(), "accepted": c.accepted(),
                 "refused": c.refused()}
        if c.boundary is not None:
            entry.update(runs_as_slot_user=c.boundary.runs_as_slot_user(),
                         other_gpu_refused=c.boundary.other_gpu_refused(),
                         other_node_refused=c.boundary.other_node_refused(),
                         own_node_opens=c.boundary.own_node_opens())
        slots.append(entry)
    results: dict[str, Any] = {
        "health_checked": all(c.health.checked for c in checks),
        "slots_healthy": all(c.health.healthy for c in checks),
        "one_gpu_per_container": all(c.exclusive() for c in checks),
        "hook_accepts_own_gpu": all(c.accepted() for c in checks),
        "hook_refuses_other_gpu": all(c.refused() for c in checks)}
    not_checked = []
    boundaries = [c.boundary for c in checks if c.boundary is not None]
    if boundaries:
        results["runs_as_slot_user"] = all(b.runs_as_slot_user() for b in boundaries)
        results["filter_refuses_other_gpu"] = all(b.other_gpu_refused() for b in boundaries)
        for name, judged, why in (
                ("other_slot_node_refused", [b.other_node_refused() for b in boundaries],
                 "no other slot with a node of its own (one GPU, or MIG instances of one GPU)"),
                ("own_node_opens", [b.own_node_opens() for b in boundaries],
                 "NVML gave no minor number")):
            known = [value for value in judged if value is not None]
            if known:
                results[name] = all(known)
            if len(known) < len(judged):
                not_checked.append(f"{name} on {len(judged) - len(known)} slot(s): {why}")
    return {"slots": slots, "checks": results, "not_checked": not_checked}


def say(line: str) -> None:
    print(f"gpu_runner_check: {line}", file=sys.stderr)


def host_client(url: str) -> Any:
    """A client of the daemon at `url`, or None when none answers there."""
    import docker
    import docker.errors
    import requests

    try:
        client = docker.DockerClient(base_url=url, version=API_VERSION)
        client.ping()
        return client
    except (docker.errors.DockerException, requests.RequestException):
        return None


def run_shared(args: argparse.Namespace, slots: list[Slot]) -> list[SlotCheck]:
    """Every slot's container on the daemon at --docker-url."""
    import docker

    client = docker.DockerClient(base_url=args.docker_url)
    client.ping()
    with tempfile.TemporaryDirectory(prefix="gpu-runner-check-hooks-") as folder:
        hook_dir = hook.install(Path(folder)).script.parent
        Path(folder).chmod(0o755)
        checks = []
        for n, slot in enumerate(slots):
            status_dir = Path(tempfile.mkdtemp(prefix=f"gpu-runner-check-status{slot.index}-"))
            status_dir.chmod(0o777)  # the image's user writes there, as the runner's user does
            try:
                checks.append(check(Where(client, hook_dir, status_dir), args.image, slot,
                                    other_slot(slots, n)))
            finally:
                shutil.rmtree(status_dir, ignore_errors=True)
    return checks


def other_slot(slots: list[Slot], n: int) -> str:
    return slots[(n + 1) % len(slots)].uuid if len(slots) > 1 else OUTSIDER


def rootless_config(folder: Path, mig: bool) -> RunnerConfig:
    """A runner.yml of today's fields plus the check's own isolation names, loaded."""
    token = folder / "token"
    token.write_text("unused\n", encoding="utf-8")  # no GitHub here; the schema wants one
    token.chmod(0o600)
    document = {
        "github": {"repository": "octo-org/gpu-check", "auth": {"token_file": str(token)}},
        "runner": {"image": PLACEHOLDER_IMAGE},
        "slots": {"source": (SlotSource.MIG if mig else SlotSource.GPUS).value},
        "work_root": str(folder / "w"),  # short: the engines' sockets live under it
        "isolation": {"engine": "rootless", "user_prefix": USER_PREFIX,
                      "subordinate_id_base": SUBORDINATE_BASE}}
    path = folder / "runner.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return load_runner_config(path)


@contextmanager
def nodes_put_back(nodes: list[str]) -> Iterator[None]:
    """The device nodes' owner and mode as they were, whatever set-up changes."""
    before = {node: os.stat(node) for node in nodes if os.path.exists(node)}
    try:
        yield
    finally:
        for node, was in before.items():
            os.chown(node, was.st_uid, was.st_gid)
            os.chmod(node, stat.S_IMODE(was.st_mode))


def image_in(endpoint: Any, image: str, docker_url: str) -> None:
    """`image` in the slot's engine: loaded from the host's daemon when it has it, else
    pulled through the filter."""
    import docker.errors

    host = host_client(docker_url)
    try:
        if host is not None:
            try:
                endpoint.images.load(b"".join(host.images.get(image).save(named=True)))
                return
            except docker.errors.ImageNotFound:
                pass
        endpoint.images.pull(image)
    finally:
        if host is not None:
            host.close()


def run_rootless(args: argparse.Namespace, slots: list[Slot], raw: Raw) -> list[SlotCheck]:
    """Set-up as `runner setup` does, then per slot its endpoint and containers."""
    import docker

    from repro_gate.runner.host_setup import set_up
    from repro_gate.runner.slot_endpoint import SlotEndpoint

    nodes = device_nodes(slots, raw)
    folder = Path(tempfile.mkdtemp(prefix="rgck-", dir="/tmp"))
    folder.chmod(0o711)  # the slots' users pass through to their folders
    try:
        with nodes_put_back(sorted(set(nodes.values()))):
            config = rootless_config(folder, args.mig)
            set_up(config, slots, lambda line: say(f"setup: {line}"))
            checks = []
            for n, slot in enumerate(slots):
                other = other_slot(slots, n)
                other_node = nodes.get(other)
                own_node = nodes.get(slot.uuid)
                with SlotEndpoint(config, slot) as endpoint:
                    job = docker.DockerClient(base_url=f"unix://{endpoint.socket}",
                                              version=API_VERSION, timeout=300)
                    engine = docker.DockerClient(base_url=endpoint.engine_url,
                                                 version=API_VERSION, timeout=300)
                    image_in(job, args.image, args.docker_url)
                    hook_dir = hook.install(endpoint.folders.work / "gpu-check-hooks"
                                            ).script.parent
                    status_dir = endpoint.folders.work / "gpu-check-status"
                    status_dir.mkdir(mode=0o777)
                    status_dir.chmod(0o777)

                    boundary = partial(
                        measure_boundary, identity=SlotIdentity.of(config, slot), job=job,
                        engine=engine, image=args.image, other=other, own_node=own_node,
                        # MIG instances of one GPU share its node: no other node to try.
                        other_node=other_node if other_node != own_node else None)
                    checks.append(check(Where(job, hook_dir, status_dir), args.image, slot,
                                        other, boundary))
                    job.close()
                    engine.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return checks


class _Parser(argparse.ArgumentParser):
    """Bad arguments exit EXIT_USAGE (argparse's own 2 is EXIT_ERROR here)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"gpu_runner_check: {message}\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("rootless", "shared"), default="rootless",
                        help="runner.yml's isolation.engine (default: rootless; needs root)")
    parser.add_argument("--image", default=DEFAULT_IMAGE,
                        help="image of the per-slot containers; needs python3 and sh")
    parser.add_argument("--mig", action="store_true", help="one slot per MIG instance")
    parser.add_argument("--docker-url", default=DEFAULT_DOCKER_URL,
                        help="shared: the daemon; rootless: where the image is loaded from")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    slots, raw = discover(SlotSource.MIG if args.mig else SlotSource.GPUS)
    import docker
    import requests

    try:
        checks = (run_rootless(args, slots, raw) if args.engine == "rootless"
                  else run_shared(args, slots))
    except (docker.errors.DockerException, requests.RequestException, CheckError,
            ReproGateError, OSError) as error:
        say(one_line(error))
        return EXIT_ERROR
    result = report(checks)
    print(json.dumps(result, indent=2, default=str))
    return EXIT_OK if all(result["checks"].values()) else EXIT_CHECK_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
