"""A private Docker Engine on which a GPU device request starts, on a machine with no GPU.

dockerd (20.10) registers its `nvidia` device driver at start when `nvidia-container-runtime-hook`
is on its PATH; a container with `DeviceRequest(driver="nvidia", …)` then gets that binary as an
OCI prestart hook (args `prestart`, the container's state JSON on stdin) and the requested
devices as NVIDIA_VISIBLE_DEVICES in the container's own environment (its bundle's config.json,
not the hook's environment). Here the hook is a no-op that records `<container id> <devices>`
and exits 0, so a device request by UUID starts for real and the test sees what was asked for.

The daemon must not fight the shared one on /var/run/docker.sock: its own socket, data root,
exec root (containerd, shims, netns), pidfile and config file under one temporary folder, and a
bridge of its own with no iptables rules and no ip_forward. (`--bridge none` is not an option:
dockerd then deletes the host's docker0, which the shared daemon's containers use.) The tests'
containers use the network "none". It pulls from the loopback registry itself (the daemon runs
in the host's network). Used by the `gpu_dockerd` fixture (docker_fixtures.py) and by
bench/runner_soak.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.errors
import requests

from helpers.paths import FIXTURES

HOOK_NAME = "nvidia-container-runtime-hook"
NETWORK = "none"  # the runner containers need none here
BRIDGE_PREFIX = "rgbr"  # + 8 hex: under the 15 characters of an interface name
STARTUP_SECONDS = 60
STOP_SECONDS = 30
LOG_TAIL = 3  # lines of the daemon's log quoted when it does not start (the folder goes)
STANDIN_DIR = FIXTURES / "standin_runner"
STANDIN_REPOSITORY = "repro-gate-test/standin-runner"
# The build context's files and their modes (set here: the base image has no chmod to RUN).
STANDIN_FILES = {"Dockerfile": 0o644, "run.sh": 0o755, "dirname": 0o755,
                 "standin_runner.py": 0o644}
API_VERSION = "1.41"  # Docker Engine 20.10's; fixed, so the client exists before the daemon

# The hook's whole program. runc runs it in the host's namespaces, with dockerd's environment;
# it must exit 0 or the container does not start.
HOOK_PROGRAM = '''#!{python}
"""No-op {name} for tests: records `<container id> <NVIDIA_VISIBLE_DEVICES>`."""
import json, os, sys

LOG = {log!r}


def requested(state):
    """NVIDIA_VISIBLE_DEVICES of the container's process, as the real hook reads it."""
    try:
        with open(os.path.join(state["bundle"], "config.json"), encoding="utf-8") as handle:
            environment = json.load(handle)["process"]["env"]
    except (OSError, KeyError, ValueError):
        environment = []
    for item in environment:
        if item.startswith("NVIDIA_VISIBLE_DEVICES="):
            return item.split("=", 1)[1]
    return os.environ.get("NVIDIA_VISIBLE_DEVICES", "")


if sys.argv[1:2] == ["prestart"]:
    state = json.load(sys.stdin)
    line = "%s %s\\n" % (state["id"], requested(state))
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())  # one write per line: concurrent starts do not interleave
    os.close(fd)
'''


class DockerdError(RuntimeError):
    """The private daemon could not be started; the text quotes its log."""


class GpuDockerd:
    """One private dockerd under `root` (a fresh temporary folder when None)."""

    network = NETWORK

    def __init__(self, storage_driver: str, root: Path | None = None) -> None:
        self.storage_driver = storage_driver
        # Short paths: unix sockets under the exec root must stay under 108 characters.
        self.root = root or Path(tempfile.mkdtemp(prefix="rg-dockerd-"))
        self.socket = self.root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.hook_log = self.root / "hook.log"
        self.daemon_log = self.root / "dockerd.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._install_hook()
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()
        self.bridge = BRIDGE_PREFIX + digest[:8]
        self._create_bridge(f"10.231.{int(digest[8:12], 16) % 250 + 1}.1/24")
        self.client = docker.DockerClient(base_url=self.url, version=API_VERSION, timeout=120)

    def _install_hook(self) -> None:
        bin_dir = self.root / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        hook = bin_dir / HOOK_NAME
        hook.write_text(HOOK_PROGRAM.format(python=sys.executable, name=HOOK_NAME,
                                            log=str(self.hook_log)), encoding="utf-8")
        hook.chmod(0o755)
        self.hook_log.touch()
        (self.root / "daemon.json").write_text("{}\n", encoding="utf-8")  # not /etc/docker's

    def _create_bridge(self, address: str) -> None:
        """The daemon's own bridge, so that it leaves docker0 (the shared daemon's) alone."""
        for command in (["ip", "link", "add", "name", self.bridge, "type", "bridge"],
                        ["ip", "addr", "add", address, "dev", self.bridge],
                        ["ip", "link", "set", self.bridge, "up"]):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                self._delete_bridge()
                raise DockerdError(f"{' '.join(command)}: {done.stderr.strip()}")

    def _delete_bridge(self) -> None:
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)

    def arguments(self) -> list[str]:
        """The dockerd command line."""
        return [
            "dockerd",
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "dockerd.pid"),
            "--config-file", str(self.root / "daemon.json"),
            "-H", self.url,
            "--storage-driver", self.storage_driver,
            "--log-level", "warn",  # its log is quoted when it does not start: keep it short
            # Its own bridge; no iptables rules, no sysctl: the shared daemon owns those.
            "--bridge", self.bridge, "--iptables=false", "--ip-masq=false", "--ip-forward=false",
        ]

    def start(self) -> None:
        """Start the daemon and wait until it answers; DockerdError when it does not."""
        if self.running():
            return
        environment = {**os.environ, "PATH": f"{self.root / 'bin'}:{os.environ.get('PATH', '')}"}
        with self.daemon_log.open("ab") as log:
            self._process = subprocess.Popen(
                self.arguments(), stdout=log, stderr=subprocess.STDOUT, env=environment,
                start_new_session=True,
            )
        if not self._wait_ready():
            self.stop()
            raise DockerdError(f"the private dockerd did not start: {self._log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline and self.running():
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                if self.client.ping():
                    return True
            time.sleep(0.3)
        return False

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """SIGTERM (dockerd stops its containers and its containerd), SIGKILL after a while."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_SECONDS)

    def restart(self) -> None:
        """Stop and start again on the same data root: images and stopped containers stay."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Remove its containers, stop it and delete everything it had (remove_later). The
        containers go first: with `live-restore` (a test's daemon.json) they would outlive the
        daemon."""
        if self.running():
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                for container in self.client.containers.list(all=True):
                    container.remove(force=True)
        self.stop()
        self.client.close()
        _unmount_under(self.root)
        remove_later(self.root)
        self._delete_bridge()

    def visible_devices(self) -> dict[str, str]:
        """Container ID -> the devices its request named, for every container the hook saw."""
        found: dict[str, str] = {}
        for line in self.hook_log.read_text(encoding="utf-8").splitlines():
            container, _, devices = line.partition(" ")
            found[container] = devices
        return found

    def pull(self, reference: str) -> str:
        """Pull `reference` (NAME@sha256:…) into this daemon; its image ID."""
        repository, _, digest = reference.partition("@")
        for event in self.client.api.pull(repository, tag=digest, stream=True, decode=True):
            if "error" in event:
                raise DockerdError(f"pull of {reference} failed: {event['error']}")
        return str(self.client.images.get(reference).id)

    def _log_tail(self) -> str:
        lines = self.daemon_log.read_text(encoding="utf-8", errors="replace").splitlines()
        return " | ".join(line.strip() for line in lines[-LOG_TAIL:] if line.strip())


def _unmount_under(root: Path) -> None:
    """What a killed daemon left mounted under `root` (overlay layers, netns), deepest first;
    without this the folder cannot be deleted."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def remove_later(root: Path) -> None:
    """Delete `root` in a process of its own that outlives this one: an engine's image layers
    take seconds to delete (many seconds on a disk mounted with `discard`), and nothing waits
    for them. It stays on `root`'s file system: a mount left under it is not entered."""
    subprocess.run(["sh", "-c", 'rm -rf --one-file-system -- "$1" >/dev/null 2>&1 &', "sh",
                    str(root)], check=False)


def standin_context() -> bytes:
    """The stand-in runner's build context as a tar, every file owned by root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, mode in STANDIN_FILES.items():
            data = (STANDIN_DIR / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_standin_image(client: docker.DockerClient, base: str) -> str:
    """`repro-gate-test/standin-runner:<hash>`, built FROM `base` on `client`'s daemon unless
    that tag is there already."""
    context = standin_context()
    digest = hashlib.sha256(context + base.encode()).hexdigest()[:16]
    tag = f"{STANDIN_REPOSITORY}:{digest}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(tag)
        return tag
    client.images.build(fileobj=io.BytesIO(context), custom_context=True, tag=tag,
                        buildargs={"BASE": base}, rm=True, forcerm=True)
    return tag


def daemon_info(storage_driver: str) -> dict[str, object]:
    """For a manual check: start one, print what it says about itself, stop it."""
    daemon = GpuDockerd(storage_driver)
    try:
        daemon.start()
        info = daemon.client.info()
        return {key: info.get(key) for key in ("Driver", "DockerRootDir", "Runtimes")}
    finally:
        daemon.close()


if __name__ == "__main__":
    print(json.dumps(daemon_info(sys.argv[1] if len(sys.argv) > 1 else "overlay2"), indent=1))
