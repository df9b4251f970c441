"""Helpers of the runner service's tests: runner.yml files, an App's keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

TOKEN = "ghs_actions"  # a token the fake knows
SLOT_UUIDS = ["GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b",
              "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"]
# Part of a stand-in job (Python): ask the slot's Docker socket for the GPU `other`; prints
# "PROXY-OTHER-GPU <status>".
ASK_FOR_OTHER_GPU = r'''
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/var/run/docker.sock")
body = {"Image": "none", "HostConfig": {"DeviceRequests": [
    {"Driver": "nvidia", "DeviceIDs": [other], "Capabilities": [["gpu"]]}]}}
connection = Unix("docker")
connection.request("POST", "/containers/create", json.dumps(body),
                   {"Content-Type": "application/json"})
print("PROXY-OTHER-GPU", connection.getresponse().status, flush=True)
'''
RUNNER_IMAGE = "ghcr.io/actions/actions-runner@sha256:" + "5" * 64  # pinned; never pulled


def write_config(folder: Path, github: dict, **top: object) -> Path:
    """A runner.yml in `folder` listing two H100 slots by UUID, plus `top` keys."""
    document = {"github": github, "host": "gpuhost", "runner": {"image": RUNNER_IMAGE},
                "slots": {"source": "uuids", "uuids": SLOT_UUIDS,
                          "model": "NVIDIA H100 80GB HBM3"},
                **top}
    path = folder / "runner.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def token_file(folder: Path, token: str = TOKEN) -> Path:
    path = folder / "token"
    path.write_text(token + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def app_keys(folder: Path) -> tuple[Path, Path]:
    """A fresh RSA key pair (private, public) in PEM, made by openssl as GitHub's are."""
    private, public = folder / "app.pem", folder / "app.pub.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(private), "2048"], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(private), "-pubout", "-out", str(public)],
                   check=True, capture_output=True)
    return private, public


def repro_gate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`repro-gate ARGS` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
