"""A slot's Docker API proxy (`runner.proxy.server.serve`) in a thread of its own, for tests."""

from __future__ import annotations

import asyncio
import functools
import http.client
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import docker

from repro_gate.runner.proxy.policy import SlotPolicy
from repro_gate.runner.proxy.server import serve


class RunningProxy:
    """`serve` in its own thread and event loop, as the runner service will run it."""

    def __init__(self, policy: SlotPolicy, upstream: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="rg-proxy-"))  # short: socket paths
        self.socket = self.directory / "docker.sock"
        self.policy = policy
        self.upstream = upstream
        self.loop = asyncio.new_event_loop()
        self.task: asyncio.Task[None] | None = None
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.socket.exists():
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.05)

    @functools.cached_property
    def client(self) -> docker.DockerClient:
        """The Docker SDK on the proxy's socket (it asks the daemon's API version at once)."""
        return docker.DockerClient(base_url=f"unix://{self.socket}", timeout=120)

    def _run(self) -> None:
        self.task = self.loop.create_task(serve(self.policy, self.socket, self.upstream))
        try:
            self.loop.run_until_complete(self.task)
        except asyncio.CancelledError:
            self.ended.set()
        finally:
            self.loop.close()

    def stop(self) -> None:
        if "client" in self.__dict__:
            self.client.close()
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(timeout=15)
        shutil.rmtree(self.directory, ignore_errors=True)

    def connection(self) -> http.client.HTTPConnection:
        """A raw keep-alive HTTP connection to the proxy."""
        connection = http.client.HTTPConnection("localhost", timeout=30)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(self.socket))
        connection.sock = sock
        return connection
