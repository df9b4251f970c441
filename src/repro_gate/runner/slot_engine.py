"""A slot's own rootless Docker engine, run under the slot's unprivileged user.

This is the boundary the kernel enforces (docs/runner-threat-model.md): the daemon, its
containers and every mount they make run in a user namespace whose root is the slot's user on
the host, so a job that got any request past the filter still cannot read what that user cannot
read: root's files, another slot's folders (each 0700, its own owner), another GPU's device node.

The launcher is docker.io's `dockerd-rootless.sh` (rootlesskit + slirp4netns). rootlesskit gets
`--pidns`: when it ends, the kernel ends every process of the engine, containers included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import docker
import docker.errors
import requests

from repro_gate.errors import ConfigError, ErrorKind, GateError
from repro_gate.runner.runner_config import (
    DEBIAN_ROOTLESS_LAUNCHER,
    ROOTLESS_LAUNCHER,
    RunnerConfig,
)
from repro_gate.runner.slot_folders import Owner, SlotFolders

START_SECONDS = 60.0
STOP_SECONDS = 30.0
PING_SECONDS = 2
CONTAINER_STOP_SECONDS = 5  # what the engine's containers get before they are killed
LOG_TAIL_LINES = 3
# A Unix socket path holds at most 107 bytes; containerd's sits deepest in the exec root.
SOCKET_PATH_LIMIT = 107
DEEPEST_SOCKET = "containerd/containerd.sock"
ROOTLESSKIT_FLAGS = "--pidns"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def launcher(config: RunnerConfig) -> str:
    """The rootless launcher's path; ConfigError naming the package when there is none."""
    named = config.isolation.engine_command
    found = shutil.which(named or ROOTLESS_LAUNCHER)
    if found is None and named is None and Path(DEBIAN_ROOTLESS_LAUNCHER).is_file():
        found = DEBIAN_ROOTLESS_LAUNCHER
    if found is None:
        raise ConfigError(f"isolation.engine_command {named or ROOTLESS_LAUNCHER}: not found"
                          " (Debian: apt install docker.io rootlesskit slirp4netns uidmap)")
    return found


def check_socket_paths(folders: SlotFolders) -> None:
    for path in (folders.engine_socket, folders.engine_exec / DEEPEST_SOCKET,
                 folders.proxy_socket):
        if len(os.fsencode(path)) > SOCKET_PATH_LIMIT:
            raise ConfigError(f"work_root {folders.base.parent}: too long for the slot engine's"
                              f" sockets ({path} is over {SOCKET_PATH_LIMIT} bytes)")


class SlotEngine:
    """One rootless dockerd for one slot: `start()`, `url`, `stop()`."""

    def __init__(self, launcher_path: str, owner: Owner, folders: SlotFolders) -> None:
        self.launcher_path = launcher_path
        self.owner = owner
        self.folders = folders
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.folders.engine_socket}"

    def start(self) -> None:
        """Start the daemon and wait until it answers; GateError quoting its log if not."""
        check_socket_paths(self.folders)
        self.folders.reset_engine_state(self.owner)
        with self.folders.engine_log.open("ab") as log:
            self.process = subprocess.Popen(
                self._command(), env=self._environment(), cwd=self.folders.engine,
                user=self.owner.uid, group=self.owner.gid, extra_groups=[],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise GateError(f"the slot engine did not start: {self._log_tail()}"
                                f" (log: {self.folders.engine_log})", kind=ErrorKind.DOCKER)
            time.sleep(0.1)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_status(self) -> str:
        code = None if self.process is None else self.process.poll()
        return "not started" if code is None else f"exit status {code}"

    def stop(self) -> None:
        """Its containers stopped, then the daemon; the pid namespace takes the rest."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            self._remove_containers()
        # The launcher may end before dockerd, containerd and slirp4netns, its process group:
        # the group is waited for, not only the launcher.
        _signal_group(process, signal.SIGTERM)
        if not _group_ended(process, STOP_SECONDS):
            _signal_group(process, signal.SIGKILL)
            _group_ended(process, STOP_SECONDS)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_SECONDS)

    def kill(self) -> None:
        """The engine and everything it ran ended at once, nothing asked to stop first (the
        reset between jobs trusts nothing the engine holds); returns once no process of the
        slot's user is left."""
        process, self.process = self.process, None
        if process is not None:
            _signal_group(process, signal.SIGKILL)
            _group_ended(process, STOP_SECONDS)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_SECONDS)
        # The PID namespace's processes (containers, their shims) end with its first process,
        # a moment after it: wait for them, so that no one writes while the data root empties.
        deadline = time.monotonic() + STOP_SECONDS
        while _processes_of(self.owner.uid) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _command(self) -> list[str]:
        folders = self.folders
        return [self.launcher_path,
                "--data-root", str(folders.engine_data),
                "--exec-root", str(folders.engine_exec),
                "--pidfile", str(folders.engine_exec / "dockerd.pid"),
                "--host", self.url]

    def _environment(self) -> dict[str, str]:
        # The service's PATH first: where the operator's NVIDIA hook and tools are.
        path = ":".join(filter(None, (os.environ.get("PATH"), SYSTEM_PATH)))
        return {"PATH": path, "HOME": str(self.folders.engine),
                "XDG_RUNTIME_DIR": str(self.folders.engine_runtime),
                "DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS": ROOTLESSKIT_FLAGS}

    def _answers(self) -> bool:
        try:
            client = docker.DockerClient(base_url=self.url, timeout=PING_SECONDS)
        except docker.errors.DockerException:
            return False
        try:
            return bool(client.ping())
        except (docker.errors.DockerException, requests.RequestException):
            return False
        finally:
            client.close()

    def _remove_containers(self) -> None:
        """Quicker than the daemon's own 10 s stop per container at SIGTERM."""
        try:
            client = docker.DockerClient(base_url=self.url, timeout=int(STOP_SECONDS))
            for container in client.containers.list(all=True):
                container.remove(force=True)
            client.close()
        except Exception:  # the pid namespace ends them anyway
            pass

    def _log_tail(self) -> str:
        try:
            lines = self.folders.engine_log.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:]) or "no output"


def _signal_group(process: subprocess.Popen[bytes], number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, number)


def _processes_of(uid: int) -> list[int]:
    """The IDs of the processes running as `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(int(entry.name))
    return found


def _group_ended(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """True once no process of the launcher's group is left (the launcher itself reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        process.poll()  # reap the launcher, so that it does not keep the group alive
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
