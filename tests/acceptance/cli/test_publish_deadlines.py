"""Publishing ends at its deadline even when a server trickles its answer a byte a second.

A real HTTP server on 127.0.0.1 answers every request with one header byte per second (for at
most a minute): no socket timeout ever fires. The gate must still exit within the deadline,
with its verdict's exit code, and say how to send the results later.
"""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gate_cli import script
from helpers.paths import TRAININGS

DEADLINE = 3
SLACK = 4  # process start and exit, the manifest's second write
TRICKLE_LIMIT_SECONDS = 60


class Trickle(socketserver.ThreadingTCPServer):
    """Reads a request, then sends `HTTP/1.1 200 OK` and an endless header, a byte a second."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), TrickleHandler)
        self.requests: list[float] = []  # monotonic time each request arrived
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class TrickleHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: Trickle = self.server  # type: ignore[assignment]
        self.request.settimeout(5)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            received += chunk
        server.requests.append(time.monotonic())
        answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * TRICKLE_LIMIT_SECONDS
        for byte in answer:
            if server.stopping.wait(1.0):
                return
            try:
                self.request.sendall(bytes([byte]))
            except OSError:
                return


@contextmanager
def serving() -> Iterator[Trickle]:
    server = Trickle()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    with serving() as server:
        yield server


def clean_environment(**extra: str) -> dict[str, str]:
    prefixes = ("GITHUB_", "INPUT_", "REPRO_GATE_", "ACTIONS_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(prefixes)}, **extra}


def run(workdir: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                                 float]:
    """The completed command and the monotonic time it exited."""
    completed = subprocess.run(
        [sys.executable, "-m", "repro_gate", *args], cwd=workdir, env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )
    return completed, time.monotonic()


def test_slow_pushgateway_cannot_hold_the_gate(project: Path, trickle: Trickle) -> None:
    # Its own gate: the one whose Pushgateway trickles.
    (project / ".repro-gate.yml").write_text(
        f"metrics:\n  pushgateway_url: {trickle.url}\n  timeout: {DEADLINE}\n"
    )
    completed, exited = run(project, clean_environment(),
                            "check", "--quiet", *script("deterministic.py"))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert trickle.requests, "the gate never reached the gateway"
    assert exited - trickle.requests[0] < DEADLINE + SLACK

    manifest_path = project / "repro-gate-out" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["verdict"] == "pass"
    metrics = manifest["metrics"]
    assert metrics["pushed"] is False
    assert f"{DEADLINE}s deadline" in metrics["reason"]
    retry = f"repro-gate push --manifest {manifest_path} --pushgateway-url {trickle.url}"
    assert metrics["retry"] == retry
    assert retry in completed.stderr


@dataclass
class Gate:
    """A finished gate: its command, when it exited, when the server got each request, and
    where its manifest is."""

    completed: subprocess.CompletedProcess[str]
    exited: float
    requests: list[float]
    manifest_path: Path


@pytest.fixture(scope="module")
def slow_github(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    """A gate in Actions whose GitHub API trickles its answers; metrics are not configured."""
    project = tmp_path_factory.mktemp("slow-github")
    for training in TRAININGS.glob("*.py"):
        shutil.copy(training, project / training.name)
    event = tmp_path_factory.mktemp("event") / "event.json"
    event.write_text("{}")
    with serving() as trickle:
        env = clean_environment(
            GITHUB_ACTIONS="true",
            GITHUB_API_URL=trickle.url,
            GITHUB_REPOSITORY="octo-org/trainer",
            GITHUB_SHA="6dcb09b5b57875f334f61aebed695e2e4193db5e",
            GITHUB_EVENT_NAME="push",
            GITHUB_EVENT_PATH=str(event),
            GITHUB_RUN_ID="1",
            GITHUB_SERVER_URL="https://github.com",
            **{"INPUT_GITHUB-TOKEN": "ghs_trickle_token_0123456789"},
        )
        completed, exited = run(project, env, "check", "--quiet", "--report-timeout",
                                str(DEADLINE), *script("deterministic.py"))
        requests = list(trickle.requests)
    return Gate(completed, exited, requests, project / "repro-gate-out" / "manifest.json")


def test_push_command_names_the_flag_once_and_exits_2_with_the_retry(
    slow_github: Gate, trickle: Trickle, tmp_path: Path
) -> None:
    # A passing gate's manifest, copied (a push records its outcome in it): the gate of the slow
    # GitHub API, whose metrics have the default deadline of 30 s.
    completed = slow_github.completed
    assert completed.returncode == 0, completed.stderr
    manifest_path = tmp_path / "manifest.json"
    shutil.copy(slow_github.manifest_path, manifest_path)
    assert json.loads(manifest_path.read_text())["config"]["metrics"]["timeout"] == 30

    for flag in ("--pushgateway-url", "--url"):  # --url: the hidden old name
        began = time.monotonic()
        completed, exited = run(tmp_path, clean_environment(), "push", "--manifest",
                                str(manifest_path), flag, trickle.url, "--metrics-timeout", "2")
        assert completed.returncode == 2, completed.stderr
        assert exited - began < 2 + SLACK
        (line,) = completed.stderr.strip().splitlines()
        assert line.startswith("repro-gate: error: metrics push to ")
        assert line.endswith(
            f"`repro-gate push --manifest {manifest_path} --pushgateway-url {trickle.url}`"
        )
    help_text = run(tmp_path, clean_environment(), "push", "--help")[0].stdout
    assert "--pushgateway-url" in help_text and "--url" not in help_text.replace(
        "--pushgateway-url", "")


def test_slow_github_cannot_hold_the_gate(slow_github: Gate) -> None:
    completed = slow_github.completed
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert slow_github.requests, "the gate never reached the API"
    # Two phases (the check run at the start, the results at the end), each one deadline.
    assert slow_github.exited - slow_github.requests[-1] < DEADLINE + SLACK

    manifest_path = slow_github.manifest_path
    reporting = json.loads(manifest_path.read_text())["reporting"]
    assert reporting["ok"] is False
    assert reporting["retry"] == f"repro-gate report --manifest {manifest_path}"
    assert reporting["retry"] in completed.stderr
