"""The service's side of the Docker daemon: runner containers, what jobs leave, orphans, images.

Every call goes through `Daemon`, which turns the SDK's errors into one line: `DaemonGone` when
the daemon does not answer (it is restarting: the caller waits with `wait_until_back` and looks
again), `DockerFailure` for anything the daemon refused. One `Daemon` per thread: the SDK's HTTP
session is not meant to be shared between threads.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import docker
import docker.errors
import requests
from docker.types import DeviceRequest, Mount

from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.runner.proxy.ownership import SLOT_LABEL

SERVICE_LABEL = "org.repro-gate.runner-service"  # <name_prefix>-<host>: orphan clean-up
SLOT_INDEX_LABEL = "org.repro-gate.runner-slot"
# Docker Engine 20.10's API (device requests need 1.40): fixed, so that a client exists while
# the daemon is down (the SDK asks the daemon for its version otherwise) and newer engines
# still answer it.
API_VERSION = "1.41"
API_TIMEOUT = 60  # seconds for one daemon call (a pull streams, so it is not cut by this)
NAME_SUFFIX_BYTES = 6
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 10.0
LOG_FLUSH_SECONDS = 5.0  # how long the copy of a stopped runner's output may take to finish
T = TypeVar("T")


class DockerFailure(Exception):
    """A daemon call that failed; the text is one line."""


class DaemonGone(DockerFailure):
    """The daemon did not answer (stopped, restarting, socket gone)."""


class Missing(DockerFailure):
    """The container, image, volume or network does not exist (404)."""


class Conflict(DockerFailure):
    """The daemon refused with 409: for a create, another container has the name."""


@dataclass(frozen=True)
class Bind:
    """A host folder or socket in the runner container."""

    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class RunnerSpec:
    """Everything one runner container is created with."""

    name: str
    image: str
    command: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    network: str
    labels: tuple[tuple[str, str], ...]
    gpu_uuid: str
    binds: tuple[Bind, ...]
    groups: tuple[str, ...] = ()  # supplementary groups (the GPU's, on a slot's own engine)


@dataclass(frozen=True)
class ContainerState:
    """What the service needs of an inspected container."""

    id: str
    running: bool
    exit_code: int


def runner_container_name(stem: str) -> str:
    """STEM-<12 random hex digits>: a new name per runner container, which no job can guess
    and take first (the service finds its containers by label and ID, never by name)."""
    return f"{stem}-{secrets.token_hex(NAME_SUFFIX_BYTES)}"


def service_label(name_prefix: str, host: str) -> str:
    """The value of SERVICE_LABEL for this service: one service per host and prefix."""
    return f"{name_prefix}-{host}"


def runner_labels(service: str, slot_uuid: str, slot_index: int) -> tuple[tuple[str, str], ...]:
    """The slot label (the proxy takes the runner as the slot's), the service's and the index."""
    return ((SLOT_LABEL, slot_uuid), (SERVICE_LABEL, service), (SLOT_INDEX_LABEL, str(slot_index)))


class Daemon:
    """One connection to the Docker daemon at `url`."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.client = docker.DockerClient(base_url=url, version=API_VERSION,
                                               timeout=API_TIMEOUT)
        except docker.errors.DockerException as error:
            raise DockerFailure(f"Docker at {url}: {one_line(error)}") from None

    def _call(self, what: str, action: Callable[[], T]) -> T:
        try:
            return action()
        except (requests.ConnectionError, requests.Timeout) as error:
            raise DaemonGone(f"{what}: the Docker daemon at {self.url} does not answer"
                             f" ({one_line(error)})") from None
        except docker.errors.NotFound as error:
            raise Missing(f"{what}: {one_line(error.explanation or str(error))}") from None
        except docker.errors.APIError as error:
            message = error.explanation or str(error)
            failure = Conflict if error.status_code == 409 else DockerFailure
            raise failure(f"{what}: {one_line(message)}") from None
        except docker.errors.DockerException as error:
            raise DockerFailure(f"{what}: {one_line(error)}") from None

    def ping(self) -> None:
        """DaemonGone unless the daemon answers."""
        self._call("ping", self.client.ping)

    def wait_until_back(self, stop: threading.Event, note: Callable[[str], None]) -> bool:
        """Ping with capped backoff until the daemon answers (True) or `stop` is set (False)."""
        delay = RECONNECT_FIRST_DELAY
        note(f"the Docker daemon at {self.url} does not answer: waiting for it")
        while not stop.is_set():
            try:
                self.ping()
            except DockerFailure:
                stop.wait(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
                continue
            note("the Docker daemon answers again")
            return True
        return False

    def ensure_image(self, reference: str) -> None:
        """The runner image present, or pulled by its digest; GateError (one line) if neither."""
        try:
            self._call("inspect image", lambda: self.client.api.inspect_image(reference))
            return
        except Missing:
            pass  # not present: pull it
        repository, _, digest = reference.partition("@")
        if not digest:
            raise GateError(f"runner.image {reference}: not present and not pullable by digest",
                            kind=ErrorKind.IMAGE_NOT_FOUND)
        try:
            events = self._call("pull", lambda: self.client.api.pull(
                repository, tag=digest, stream=True, decode=True))
            for event in self._call("pull", lambda: list(events)):
                if "error" in event:
                    raise DockerFailure(str(event["error"]))
            self._call("inspect image", lambda: self.client.api.inspect_image(reference))
        except DockerFailure as error:
            raise GateError(f"runner.image {reference}: cannot be pulled: {error}",
                            kind=ErrorKind.IMAGE_NOT_FOUND) from None

    def create_runner(self, spec: RunnerSpec) -> str:
        """Create the runner container (not started); its ID."""
        device = DeviceRequest(driver="nvidia", device_ids=[spec.gpu_uuid],
                               capabilities=[["gpu"]])
        mounts = [Mount(bind.target, str(bind.source), type="bind", read_only=bind.read_only)
                  for bind in spec.binds]
        container = self._call(f"create {spec.name}", lambda: self.client.containers.create(
            spec.image, list(spec.command), name=spec.name, environment=dict(spec.environment),
            labels=dict(spec.labels), network_mode=spec.network, device_requests=[device],
            mounts=mounts, group_add=list(spec.groups), detach=True))
        return str(container.id)

    def start(self, container: str) -> None:
        self._call(f"start {container[:12]}", lambda: self.client.api.start(container))

    def state(self, container: str) -> ContainerState | None:
        """The container's state by ID or name; None when it does not exist."""
        try:
            found = self._call(f"inspect {container[:12]}",
                               lambda: self.client.api.inspect_container(container))
        except Missing:
            return None
        state = found.get("State") or {}
        return ContainerState(str(found["Id"]), bool(state.get("Running")),
                              int(state.get("ExitCode") or 0))

    def stop(self, container: str, grace: int) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds (a gone container is not an error)."""
        with contextlib.suppress(Missing):
            self._call(f"stop {container[:12]}", lambda: self.client.api.stop(
                container, timeout=grace))

    def remove_labelled(self, label: str) -> list[str]:
        """Remove every container (running or not), then volume and network, with `label`
        (`key=value`); the names of the containers removed."""
        filters = {"label": [label]}
        found = self._call("list containers", lambda: self.client.api.containers(
            all=True, filters=filters))
        names = []
        for item in found:
            name = (item.get("Names") or [item["Id"][:12]])[0].lstrip("/")
            with contextlib.suppress(Missing):
                self._call(f"remove {name}", partial(
                    self.client.api.remove_container, item["Id"], force=True, v=True))
            names.append(name)
        volumes = self._call("list volumes", lambda: self.client.api.volumes(filters=filters))
        for volume in (volumes or {}).get("Volumes") or []:
            with contextlib.suppress(Missing):
                self._call("remove volume", partial(
                    self.client.api.remove_volume, volume["Name"], force=True))
        for network in self._call("list networks", lambda: self.client.api.networks(
                filters=filters)):
            with contextlib.suppress(Missing):
                self._call("remove network", partial(
                    self.client.api.remove_network, network["Id"]))
        return names

    def copy_output(self, container: str, line: Callable[[str], None]) -> OutputCopy:
        """Copy the container's output, line by line, to `line` in a thread of its own."""
        return OutputCopy(self.url, container, line)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()


class OutputCopy:
    """A runner's stdout and stderr, followed until it stops; a stream the daemon cut (it
    restarted, and `live-restore` kept the runner) is followed again from its last line."""

    def __init__(self, url: str, container: str, line: Callable[[str], None]) -> None:
        # A client of its own: it streams in its thread while the slot's thread polls.
        self._client = docker.DockerClient(base_url=url, version=API_VERSION,
                                           timeout=API_TIMEOUT)
        self._container = container
        self._line = line
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"output-{container[:12]}")
        self._thread.start()

    def _run(self) -> None:
        since: float | None = None
        try:
            while True:
                since = self._follow(since)
                if self._done.is_set() or not self._still_running():
                    return
                self._done.wait(RECONNECT_FIRST_DELAY)
        finally:
            self._client.close()

    def _follow(self, since: float | None) -> float | None:
        """Copy lines until the stream ends; the time of the last chunk received."""
        pending = b""
        try:
            for chunk in self._client.api.logs(self._container, stream=True, follow=True,
                                               since=since):
                since = time.time()
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for text in lines:
                    self._line(text.decode("utf-8", errors="replace").rstrip("\r"))
        except Exception:  # the daemon went away, or the container was removed
            pass
        if pending:
            self._line(pending.decode("utf-8", errors="replace"))
        return since

    def _still_running(self) -> bool:
        """Whether to follow again: the runner runs, or the daemon does not answer (yet)."""
        try:
            return bool(self._client.api.inspect_container(self._container)["State"]["Running"])
        except (requests.ConnectionError, requests.Timeout):
            return True
        except Exception:
            return False

    def finish(self) -> None:
        """Wait (briefly) for the last lines of a stopped container, then stop following."""
        self._thread.join(LOG_FLUSH_SECONDS)
        self._done.set()


def connect(url: str) -> Daemon:
    """A Daemon that answers now; GateError (one line, exit 2) otherwise."""
    try:
        daemon = Daemon(url)
        daemon.ping()
    except DockerFailure as error:
        raise GateError(f"docker_url {url}: the Docker daemon cannot be reached: {error}",
                        kind=ErrorKind.DOCKER) from None
    return daemon

