"""A host set up for rootless slots by the real `repro-gate runner setup`, and slot endpoints
started by the real `repro-gate runner slot-endpoint` (tests of the runner's isolation).

The users, subordinate IDs and /dev/net/tun mode that setup makes stay on the machine (a second
run finds them and changes nothing); the work root is removed after the session.
A no-op NVIDIA hook on the endpoint's PATH makes a GPU device request start and records what
each container asked for, as in gpu_dockerd.py; it is a shell script because the slot's user
cannot reach this machine's Python.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import yaml

from helpers.docker_fixtures import PinnedImage, unavailable
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
    shutil.rmtree(base, ignore_errors=True)


class EndpointProcess:
    """`repro-gate runner slot-endpoint --slot N` in the background, until stop()."""

    def __init__(self, host: RootlessHost, slot: int) -> None:
        env = {**os.environ, "PATH": f"{host.hook_dir}:{os.environ['PATH']}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "repro_gate", "runner", "slot-endpoint", "--config",
             str(host.config), "--slot", str(slot)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        self.first_line = self.process.stdout.readline().strip()
        if not self.first_line.startswith("DOCKER_HOST=unix://"):
            self.process.kill()
            _, errors = self.process.communicate(timeout=30)
            pytest.fail(f"slot-endpoint did not come up: {self.first_line!r} {errors}")
        self.docker_host = self.first_line.split("=", 1)[1]
        self.socket = Path(self.docker_host.removeprefix("unix://"))
        self.client = docker.DockerClient(base_url=self.docker_host, timeout=120)

    def stop(self) -> tuple[int, str]:
        """SIGTERM; its exit code and stderr."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, errors = self.process.communicate(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, errors = self.process.communicate(timeout=30)
        return self.process.returncode, errors


@pytest.fixture
def slot_endpoints(rootless_host: RootlessHost) -> Iterator[dict[int, EndpointProcess]]:
    """Both slots' endpoints, stopped after the test."""
    started: dict[int, EndpointProcess] = {}
    try:
        for slot in (0, 1):
            started[slot] = EndpointProcess(rootless_host, slot)
        yield started
    finally:
        for endpoint in started.values():
            endpoint.stop()


def load_image(source: docker.DockerClient, image: PinnedImage | str,
               target: docker.DockerClient) -> str:
    """`image` (or a tag) saved from the shared daemon and loaded through `target` (a slot
    endpoint); its ID."""
    tag = image if isinstance(image, str) else image.tag
    data = b"".join(source.images.get(tag).save(named=True))
    [loaded] = target.images.load(data)
    return str(loaded.id)
