"""A host set up for rootless slots by the real `repro-gate runner setup`, and slot endpoints
started by the real `repro-gate runner slot-endpoint` (tests of the runner's isolation).

The users, subordinate IDs and /dev/net/tun mode that setup makes stay on the machine (a second
run finds them and changes nothing); the work root is removed after the session (in the
background: gpu_dockerd.remove_later).
A no-op NVIDIA hook on the endpoint's PATH makes a GPU device request start and records what
each container asked for, as in gpu_dockerd.py; it is a shell script because the slot's user
cannot reach this machine's Python.

The endpoints (`slot_endpoints`) and the images loaded into the slots' engines (`slot_images`)
are shared by a module's tests, so an engine starts a few times per module rather than once or
twice per test; each test removes the containers it made.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import yaml

from helpers.docker_fixtures import PinnedImage, unavailable
from helpers.gpu_dockerd import remove_later
from helpers.runner_files import SLOT_UUIDS, token_file

USER_PREFIX = "rgtest-slot"
SUBORDINATE_BASE = 1_600_000_000  # away from the default, so a real setup on this host is kept
TOOLS = ("rootlesskit", "slirp4netns", "newuidmap", "dockerd")
START_SECONDS = 90

HOOK = r"""#!/bin/sh
# No-op nvidia-container-runtime-hook: records "<container id> <NVIDIA_VISIBLE_DEVICES>".
[ "$1" = prestart ] || exit 0
state=$(cat)
id=$(printf '%s' "$state" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
bundle=$(printf '%s' "$state" | sed -n 's/.*"bundle":"\([^"]*\)".*/\1/p')
devices=$(grep -o 'NVIDIA_VISIBLE_DEVICES=[^"]*' "$bundle/config.json" | head -n 1 | cut -d= -f2)
echo "$id $devices" >> LOG
"""


@dataclass(frozen=True)
class RootlessHost:
    config: Path
    work_root: Path
    hook_dir: Path
    hook_log: Path

    def folder(self, slot: int) -> Path:
        return self.work_root / f"slot{slot}"

    def visible_devices(self) -> dict[str, str]:
        found = {}
        for line in self.hook_log.read_text(encoding="utf-8").splitlines():
            container, _, devices = line.partition(" ")
            found[container] = devices
        return found


def repro_gate(*args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], capture_output=True,
                          text=True, timeout=timeout, env=env or os.environ.copy())


def write_rootless_config(folder: Path, work_root: Path, **isolation: object) -> Path:
    """Today's fields only (slots by UUID, work_root, github, runner.image) plus `isolation`."""
    document: dict[str, object] = {
        "github": {"repository": "octo-org/trainer",
                   "auth": {"token_file": token_file(folder).name}},
        "runner": {"image": "ghcr.io/actions/actions-runner@sha256:" + "5" * 64},
        "slots": {"source": "uuids", "uuids": SLOT_UUIDS},
        "work_root": str(work_root), "health": {"allow_no_gpu": True},
        "isolation": {"user_prefix": USER_PREFIX, "subordinate_id_base": SUBORDINATE_BASE,
                      **isolation}}
    path = folder / "runner.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def rootless_host() -> Iterator[RootlessHost]:
    """Two slots set up by `repro-gate runner setup` (as root)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing or os.geteuid() != 0:
        unavailable(f"root and {', '.join(TOOLS)} (Debian: rootlesskit slirp4netns uidmap"
                    " docker.io) for rootless slot engines")
    base = Path(tempfile.mkdtemp(prefix="rg-rl-", dir="/tmp"))
    base.chmod(0o711)
    hook_dir, hook_log = base / "bin", base / "hooklog" / "hook.log"
    hook_dir.mkdir()
    hook_log.parent.mkdir(mode=0o777)
    hook_log.parent.chmod(0o777)  # the slots' users append to it
    hook_log.touch(mode=0o666)
    hook_log.chmod(0o666)
    hook = hook_dir / "nvidia-container-runtime-hook"
    hook.write_text(HOOK.replace("LOG", str(hook_log)), encoding="utf-8")
    hook.chmod(0o755)
    config = write_rootless_config(base, base / "w")
    done = repro_gate("runner", "setup", "--config", str(config))
    if done.returncode != 0:
        pytest.fail(f"runner setup failed: {done.stdout}{done.stderr}")
    yield RootlessHost(config, base / "w", hook_dir, hook_log)
    remove_later(base)  # the engines' data roots: seconds to delete, which no test waits for


class EndpointProcess:
    """`repro-gate runner slot-endpoint --slot N` in the background, until stop()."""

    def __init__(self, host: RootlessHost, slot: int) -> None:
        env = {**os.environ, "PATH": f"{host.hook_dir}:{os.environ['PATH']}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "repro_gate", "runner", "slot-endpoint", "--config",
             str(host.config), "--slot", str(slot)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None and self.process.stderr is not None
        # Its stderr is read all along: an endpoint kept up for a module's tests must never
        # block on a full pipe.
        self._errors: list[str] = []
        self._reader = threading.Thread(target=self._errors.extend, args=(self.process.stderr,),
                                        daemon=True)
        self._reader.start()
        self.first_line = self.process.stdout.readline().strip()
        if not self.first_line.startswith("DOCKER_HOST=unix://"):
            self.process.kill()
            self.process.wait(timeout=30)
            self._reader.join(timeout=30)
            pytest.fail(f"slot-endpoint did not come up: {self.first_line!r} "
                        f"{''.join(self._errors)}")
        self.docker_host = self.first_line.split("=", 1)[1]
        self.socket = Path(self.docker_host.removeprefix("unix://"))
        self.client = docker.DockerClient(base_url=self.docker_host, timeout=120)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> tuple[int, str]:
        """SIGTERM; its exit code and stderr."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return self.process.returncode, "".join(self._errors)


class SlotEndpoints:
    """The slots' endpoints shared by a module's tests, each started when first asked for.

    A test that asserts on how an endpoint stops, or that kills its engine, ends it with
    stop(); `serve` and `audit` bring the slots up themselves, so a test of those calls
    release() first. The next test that asks for a slot gets a new endpoint."""

    def __init__(self, host: RootlessHost) -> None:
        self.host = host
        self._running: dict[int, EndpointProcess] = {}

    def __getitem__(self, slot: int) -> EndpointProcess:
        return self._up(slot)

    def _up(self, slot: int) -> EndpointProcess:
        endpoint = self._running.get(slot)
        if endpoint is not None and not endpoint.running():
            code, errors = self._running.pop(slot).stop()
            pytest.fail(f"the shared endpoint of slot {slot} ended by itself ({code}): {errors}")
        if endpoint is None:
            endpoint = self._running[slot] = EndpointProcess(self.host, slot)
        return endpoint

    def engine(self, slot: int) -> docker.DockerClient:
        """A client of the slot's engine itself, past the filter (its endpoint is up)."""
        self._up(slot)
        return docker.DockerClient(
            base_url=f"unix://{self.host.folder(slot)}/engine/run/docker.sock", timeout=120)

    def stop(self, slot: int) -> tuple[int, str]:
        """End the slot's endpoint; its exit code and stderr."""
        return self._running.pop(slot).stop()

    def release(self) -> None:
        """End every endpoint: the slots are free for another process."""
        for slot in list(self._running):
            self.stop(slot)


@pytest.fixture(scope="module")
def slot_endpoints(rootless_host: RootlessHost) -> Iterator[SlotEndpoints]:
    """The module's slot endpoints (SlotEndpoints), stopped after its last test."""
    endpoints = SlotEndpoints(rootless_host)
    try:
        yield endpoints
    finally:
        endpoints.release()


@dataclass(frozen=True)
class SlotImages:
    """Image IDs loaded into both slots' engines (the same ID in each)."""

    python: str
    standin: str


@pytest.fixture(scope="module")
def slot_images(slot_endpoints: SlotEndpoints, docker_client: docker.DockerClient,
                python_image: PinnedImage, standin_image: str) -> SlotImages:
    """The Python image and the stand-in runner, loaded through both slots' endpoints once
    per module: the engines keep their images (their data roots stay) through restarts."""
    targets = [slot_endpoints[slot].client for slot in (0, 1)]
    return SlotImages(python=load_image(docker_client, python_image, *targets),
                      standin=load_image(docker_client, standin_image, *targets))


def load_image(source: docker.DockerClient, image: PinnedImage | str,
               *targets: docker.DockerClient) -> str:
    """`image` (or a tag) saved once from the shared daemon and loaded through each of
    `targets` (slot endpoints or engines); its ID."""
    tag = image if isinstance(image, str) else image.tag
    data = b"".join(source.images.get(tag).save(named=True))
    loaded: set[str] = set()
    for target in targets:
        [image_loaded] = target.images.load(data)
        loaded.add(str(image_loaded.id))
    [found] = loaded
    return found
