"""Run the training as a sibling container in the user's image, isolated by default.

The gate reaches the Docker daemon through its socket (GitHub mounts the runner's socket into
container actions). A sibling container's bind mounts name *host* paths, so when the gate itself
runs in a container, every path it mounts is translated through the gate container's own mounts.

What the container sees (the workspace read-only, the run's working copy read-write) is
`launch.docker_mounts`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.models.images
import docker.types
import requests.exceptions

from repro_gate.config import ContainerConfig
from repro_gate.config.model import Gpus
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.launch import cancel, docker_image, docker_mounts
from repro_gate.launch.base import LineSink, RunOutcome, RunSpec
from repro_gate.launch.docker_mounts import container_argv_item, default_user, make_writable_for
from repro_gate.launch.docker_shell import check_shell
from repro_gate.launch.environment import preloads
from repro_gate.launch.host_paths import PathTranslator
from repro_gate.launch.shell_assignments import GATE_PYTHONPATH
from repro_gate.launch.stream import OutputPump, open_log
from repro_gate.probe import ENV_RUN_DIR

# PyTorch DataLoader workers pass batches through /dev/shm; Docker's 64 MiB default is too small.
DEFAULT_SHM_SIZE = "1g"
STOP_GRACE_SECONDS = 5
CANCEL_GRACE_SECONDS = 2  # the CI kills the whole job a few seconds after its first signal
DRAIN_SECONDS = 2.0  # the log stream ends with the container; a stuck one is abandoned
STOP_POLL_SECONDS = 0.1  # how often a running container's `stop` is looked at
LABEL_GATE = "org.repro-gate.gate"
LABEL_RUN = "org.repro-gate.run"


def device_requests(gpus: Gpus | None) -> list[docker.types.DeviceRequest]:
    """The `--gpus` equivalent: 'all', a count, device IDs/UUIDs, or 'none'/0 for no GPU."""
    if gpus == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if isinstance(gpus, tuple | list):
        return [docker.types.DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]
    if isinstance(gpus, int) and gpus > 0:
        return [docker.types.DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    return []


def connect() -> docker.DockerClient:
    """A client for the daemon named by DOCKER_HOST (default: the local socket)."""
    try:
        client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise GateError(
            f"cannot reach the Docker daemon at {where}: {one_line(error)}", kind=ErrorKind.DOCKER
        ) from None
    return client


class DockerLauncher:
    """Starts each run as a sibling container in the configured image."""

    name = "docker"

    def __init__(
        self,
        settings: ContainerConfig,
        gate: str,
        client: docker.DockerClient,
        translator: PathTranslator,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not settings.image:
            raise ValueError("a Docker launcher needs an image")
        self.settings = settings
        self.reference = settings.image  # the configured image, as written
        self.gate = gate
        self.client = client
        self.translator = translator
        self.environ = os.environ if environ is None else environ
        self._image: docker.models.images.Image | None = None

    @classmethod
    def connect(cls, settings: ContainerConfig, gate: str) -> DockerLauncher:
        """Connect to the daemon and find out where the gate runs; the image is resolved lazily."""
        if not settings.image:
            raise ValueError("a Docker launcher needs an image")
        client = connect()
        return cls(settings, gate, client, PathTranslator.for_this_process(client))

    def python_executable(self) -> str:
        """The image's own interpreter, found on its PATH."""
        return "python"

    def isolates(self, output_dir: Path) -> bool:
        """A container is isolated already: its runs start in a copy (mounted writable)."""
        return False

    def shares_by_binding(self) -> bool:
        """The copy is seen at the workspace's path: virtualenvs and data are bound over it."""
        return True

    def find_file(self, candidates: tuple[str, ...]) -> str | None:
        """Looked up in a container of the image that is created, never started, and removed."""
        return docker_image.find_file(self.client, self.image(), self.reference, candidates,
                                      {LABEL_GATE: self.gate})

    def image(self) -> docker.models.images.Image:
        """The training image, resolved (and pulled if needed) once per gate run."""
        if self._image is None:
            self._image = docker_image.resolve(self.client, self.reference)
        return self._image

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        """Create the container, stream its output, wait for it or the timeout, remove it."""
        image = self.image()
        user = self.settings.user or default_user(spec.workspace or spec.workdir)
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        make_writable_for(spec.run_dir, user)
        if spec.workspace is not None:  # the run's copy, at the one path of every run's
            make_writable_for(spec.workdir, user)
        staging = spec.run_dir.parent / f".{spec.run_dir.name}.python-path"
        run_mounts = docker_mounts.run_mounts(spec, staging, self.translator)
        python_path = run_mounts.python_path
        argv = [container_argv_item(a, spec, python_path) for a in spec.argv]
        environment = self._environment(spec, image, python_path)
        name = f"repro-gate-{spec.name.lower()}-{uuid.uuid4().hex[:12]}"
        started = time.monotonic()
        container = None
        try:
            container = self._create(image, argv, name, spec, environment, run_mounts.mounts,
                                     user)
            exit_code, timed_out = self._start_and_wait(container, spec, sink)
            check_shell(container, spec, exit_code, self.reference)
            state = _inspect_state(container)
        except BaseException:
            # Cancelled, or the gate failed: the container must not outlive the gate.
            with cancel.deferred():
                _stop(container or self._find(name), CANCEL_GRACE_SECONDS)
            raise
        finally:
            with cancel.deferred():
                if not self.settings.keep:
                    _remove(container or self._find(name))
                shutil.rmtree(staging, ignore_errors=True)
        record = docker_image.record(self.reference, image)
        return RunOutcome(
            exit_code=exit_code,
            wall_seconds=time.monotonic() - started,
            timed_out=timed_out,
            # The manifest keeps `container` in the run's entry: the image goes there too.
            details={
                "image": record,
                "container": {
                    "image": record,
                    "id": container.id,
                    "name": name,
                    "user": user,
                    "network": self.settings.network,
                    "oom_killed": bool(state.get("OOMKilled")),
                    "kept": self.settings.keep,
                },
            },
        )

    def _create(
        self,
        image: Any,
        argv: list[str],
        name: str,
        spec: RunSpec,
        environment: dict[str, str],
        mounts: list[docker.types.Mount],
        user: str,
    ) -> Any:
        try:
            return self.client.containers.create(
                image.id,
                argv,
                name=name,
                working_dir=str(docker_mounts.working_directory(spec)),
                # The gate's own host name for every run (a container's is its random ID),
                # unless the run varies it.
                hostname=spec.hostname or socket.gethostname(),
                environment=environment,
                mounts=mounts,
                user=user,
                network_mode=self.settings.network,
                read_only=True,
                tmpfs={"/tmp": "rw,exec,nosuid,nodev,mode=1777"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                pids_limit=self.settings.pids,
                mem_limit=self.settings.memory,
                shm_size=DEFAULT_SHM_SIZE,
                device_requests=device_requests(self.settings.gpus),
                labels={LABEL_GATE: self.gate, LABEL_RUN: spec.name},
                # tini as PID 1: signals reach the training, orphaned workers are reaped.
                init=True,
                stdin_open=False,
                tty=False,
            )
        except docker.errors.APIError as error:
            raise GateError(
                f"cannot create the container for run {spec.name}: {_explain(error)}",
                kind=ErrorKind.DOCKER,
            ) from None

    def _find(self, name: str) -> Any:
        """The container called `name`, when a signal came before `create` returned it.

        Found by listing (a runner slot's Docker proxy addresses containers by full ID only).
        """
        try:
            found = self.client.containers.list(all=True, filters={"name": f"^/{name}$"})
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return None
        return next((container for container in found if container.name == name), None)

    def _start_and_wait(
        self, container: Any, spec: RunSpec, sink: LineSink
    ) -> tuple[int | None, bool]:
        pump = OutputPump(open_log(spec), sink)
        try:
            self._start(container, spec)
            pump.start(_log_chunks(container))
            timed_out = False
            exit_code: int | None = None
            try:
                with _killed_when_asked(container, spec.stop):
                    result = container.wait(timeout=spec.timeout)
                exit_code = int(result.get("StatusCode", -1))
            except requests.exceptions.RequestException:  # the read timed out: the run did
                timed_out = True
                _stop(container, STOP_GRACE_SECONDS)
        finally:
            with cancel.deferred():
                pump.finish(DRAIN_SECONDS)
        return exit_code, timed_out

    def _start(self, container: Any, spec: RunSpec) -> None:
        try:
            container.start()
        except docker.errors.APIError as error:
            hint = ""
            if "could not select device driver" in _explain(error):
                hint = (
                    f" (gpus: {self.settings.gpus}): the Docker host has no GPU support;"
                    " install the NVIDIA Container Toolkit there, or set gpus: none"
                )
            raise GateError(
                f"cannot start the container for run {spec.name}: {_explain(error)}{hint}",
                kind=ErrorKind.DOCKER,
            ) from None

    def _environment(self, spec: RunSpec, image: Any, python_path: list[str]) -> dict[str, str]:
        # An allow-list: nothing of the gate's own environment (GITHUB_TOKEN, ACTIONS_*...)
        # reaches the training unless the configuration names it.
        env = {name: self.environ[name] for name in self.settings.env_allow if name in self.environ}
        env.update(spec.env)
        env[ENV_RUN_DIR] = str(spec.run_dir)
        image_env = docker_image.environment(image)
        image_pythonpath = image_env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [image_pythonpath])])
        env[GATE_PYTHONPATH] = os.pathsep.join(python_path)  # for the command's own PYTHONPATH
        env["PYTHONUNBUFFERED"] = "1"
        if spec.preload is not None:
            env["LD_PRELOAD"] = preloads(spec.preload,
                                         env.get("LD_PRELOAD") or image_env.get("LD_PRELOAD"))
        env.setdefault("HOME", "/tmp")  # the root filesystem is read-only; /tmp is the tmpfs
        if venv := spec.python_environment:  # its bin first, then the image's own PATH
            image_path = image_env.get("PATH", os.defpath)
            env.update(PATH=f"{venv.bin_dir}:{image_path}", VIRTUAL_ENV=str(venv.root))
        return env


def _log_chunks(container: Any) -> Iterator[bytes]:
    """The container's output as the daemon streams it, until the container ends."""
    # The container going away ends the stream; what was read is in the log.
    with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
        yield from container.logs(stream=True, follow=True, stdout=True, stderr=True)


@contextlib.contextmanager
def _killed_when_asked(container: Any, stop: threading.Event) -> Iterator[None]:
    """Kill the container as soon as the gate sets `stop` (fail-fast) while the block runs:
    the block's `wait` then returns with the container's end."""
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            if stop.wait(STOP_POLL_SECONDS):
                with contextlib.suppress(docker.errors.APIError,
                                         requests.exceptions.RequestException):
                    container.kill()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        finished.set()
        thread.join()


def _stop(container: Any, grace: float) -> None:
    """SIGTERM the training, SIGKILL after `grace` seconds (tini passes both to the tree)."""
    if container is None:
        return
    try:
        container.stop(timeout=int(grace))
    except (docker.errors.APIError, requests.exceptions.RequestException):
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            container.kill()


def _inspect_state(container: Any) -> dict[str, Any]:
    try:
        container.reload()
    except docker.errors.APIError:
        return {}
    return container.attrs.get("State") or {}


def _remove(container: Any) -> None:
    if container is None:
        return
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if "already in progress" not in _explain(error):
            raise


def _explain(error: Exception) -> str:
    return docker_image.explain(error)
