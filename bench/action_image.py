"""The action image: its size, and the time from `docker run` to the gate's first line of output,
prebuilt (pulled once, then cached by digest) versus built from the Dockerfile as a runner does
for `image: Dockerfile`.

The public base (python:3.12-slim) cannot be pulled here, so the image is built on the test
suite's local Python image (tests/helpers/rootfs.py: this machine's interpreter, stdlib and pip)
with its `FROM ... AS base` line replaced, and pushed to a private registry on loopback for its
digest.
The build downloads the dependencies from the package index, as on a runner.

Times, each the median of `--repeats` (the build: `--builds`, `--no-cache` like a fresh runner):
- `reference_seconds`: `docker run <base> python -c "print()"` to its line: container start and
  interpreter, the floor under any Python image (the reference of the ratios);
- `prebuilt_seconds`: `docker pull <ref@digest>` (cached: a manifest check) and `docker run` to
  the gate's first line; `dockerfile_seconds`: `docker build --no-cache` plus the same run;
- `no_bytecode_first_line_seconds`: the same image with its bytecode deleted, to weigh the
  bytecode's size (`bytecode_mb`, the .pyc files in the environment) against start time;
- `loopback_pull_seconds`: the image removed, then pulled from the loopback registry and run:
  unpacking the layers with no network in the way, the floor of a first pull on a runner.

Needs a running Docker Engine and the `docker-registry` binary. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import rootfs  # noqa: E402  (the suite's image builder; no public base is pullable here)

TARGET_SIZE_MB = 250
TARGET_START_SECONDS = 10
IMAGE = "repro-gate-bench/action"
# Inputs that get the gate past configuration to its first run, which it announces at once.
ACTION_ENV = {
    "INPUT_COMMAND": "python -c pass",
    "INPUT_RUNS": "2",
    "GITHUB_ACTIONS": "true",
    "GITHUB_WORKSPACE": "/github/workspace",
    "GITHUB_OUTPUT": "/github/file_commands/output",
    "GITHUB_STEP_SUMMARY": "/github/file_commands/summary",
}
# Classic builder: this machine's docker CLI has no buildx (a runner's uses BuildKit).
BUILD_ENV = {**os.environ, "DOCKER_BUILDKIT": "0"}


@dataclass
class StartTimes:
    """Seconds from `docker run` (or the pull before it) to the first line, per repeat; the
    pulls' share; and that line."""

    samples: list[float]
    pull_samples: list[float]
    first_line: str

    @property
    def median(self) -> float:
        return round(statistics.median(self.samples), 3)


@dataclass
class Result:
    base_image: str
    image_size_mb: float
    bytecode_mb: float
    build_seconds: float
    build_samples: list[float]
    pull_cached_seconds: float
    first_line_seconds: float
    first_line_samples: list[float]
    first_line: str
    prebuilt_seconds: float
    prebuilt_samples: list[float]
    dockerfile_seconds: float
    reference_seconds: float
    prebuilt_over_reference: float
    dockerfile_over_prebuilt: float
    no_bytecode_first_line_seconds: float
    loopback_pull_seconds: float
    load_average_before: list[float]
    load_average_after: list[float]
    target_size_mb: int = TARGET_SIZE_MB
    target_start_seconds: int = TARGET_START_SECONDS


def docker_cli(*args: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(["docker", *args], capture_output=True, text=True, env=env,
                               check=False)
    if completed.returncode != 0:
        raise SystemExit(f"docker {args[0]} failed: {completed.stderr.strip()[-500:]}")
    return completed.stdout.strip()


def timed_build(context: Path, base: str, tag: str) -> float:
    """`docker build --no-cache` of the Dockerfile in `context`, its base line set to `base`."""
    text = (context / "Dockerfile").read_text()
    dockerfile = Path(tempfile.mkdtemp()) / "Dockerfile"
    dockerfile.write_text(re.sub(r"^FROM \S+ AS base$", f"FROM {base} AS base", text,
                                 count=1, flags=re.MULTILINE))
    start = time.perf_counter()
    docker_cli("build", "--no-cache", "-q", "-f", str(dockerfile), "-t", tag, str(context),
               env=BUILD_ENV)
    return time.perf_counter() - start


def size_mb(reference: str) -> float:
    return round(int(docker_cli("image", "inspect", "--format", "{{.Size}}", reference)) / 1e6, 1)


def time_first_line(command: list[str]) -> tuple[float, str]:
    """Seconds from starting `docker run ...` to its first line of output; the container is
    removed right after (the gate's runs are not part of its start)."""
    name = f"repro-gate-bench-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    process = subprocess.Popen(["docker", "run", "--rm", "--name", name, *command],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    elapsed = time.perf_counter() - start
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    process.wait(timeout=60)
    return elapsed, line


def action_command(reference: str, scratch: Path) -> list[str]:
    """`docker run` arguments that start the action as the runner does (workspace mounted)."""
    workspace, commands = scratch / "workspace", scratch / "file_commands"
    for directory in (workspace, commands):
        directory.mkdir(exist_ok=True)
    env = [arg for name, value in ACTION_ENV.items() for arg in ("-e", f"{name}={value}")]
    return [*env, "-v", f"{workspace}:/github/workspace", "-v",
            f"{commands}:/github/file_commands", "-w", "/github/workspace", reference]


def start_times(command: list[str], repeats: int, pull: str | None = None) -> StartTimes:
    """First-line times; with `pull`, each repeat first pulls that reference (cached)."""
    samples, pulls, line = [], [], ""
    for _ in range(repeats):
        pulled = 0.0
        if pull is not None:
            start = time.perf_counter()
            docker_cli("pull", "-q", pull)
            pulled = time.perf_counter() - start
        elapsed, line = time_first_line(command)
        samples.append(round(pulled + elapsed, 3))
        pulls.append(round(pulled, 3))
    return StartTimes(samples, pulls, line)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def loopback_registry(scratch: Path) -> Iterator[str]:
    """A private registry on loopback (the daemon trusts 127.0.0.0/8 without TLS)."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        raise SystemExit("needs the docker-registry binary (Debian package docker-registry)")
    port = _free_port()
    config = scratch / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: "
                      f"{{rootdirectory: {scratch / 'registry'}}}}}\n"
                      f"http: {{addr: '127.0.0.1:{port}'}}\n")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(60):
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1).ok:
                    break
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def push_by_digest(tag: str, registry: str) -> str:
    """Push `tag` to the registry; its `registry/name@sha256:...` reference."""
    remote = f"{registry}/{tag}"
    docker_cli("tag", tag, remote)
    docker_cli("push", "-q", remote)
    digests = json.loads(docker_cli("image", "inspect", "--format", "{{json .RepoDigests}}", tag))
    return next(d for d in digests if d.startswith(f"{registry}/"))


ENVIRONMENT = "pathlib.Path('/opt/repro-gate')"  # the Dockerfile's virtual environment
SCAN_BYTECODE = (f"import pathlib; print(sum(p.stat().st_size for p in {ENVIRONMENT}"
                 ".rglob('*.pyc')))")
DROP_BYTECODE = (f"import pathlib, shutil; [shutil.rmtree(p) for p in list({ENVIRONMENT}"
                 ".rglob('__pycache__'))]")


def bytecode_mb(tag: str) -> float:
    """Megabytes of .pyc files in the image's environment."""
    found = docker_cli("run", "--rm", "--entrypoint", "python", tag, "-c", SCAN_BYTECODE)
    return round(int(found) / 1e6, 1)


def no_bytecode_variant(tag: str, scratch: Path) -> str:
    """The same image with its bytecode deleted, for the start time without it."""
    context = scratch / "no-bytecode"
    context.mkdir()
    (context / "Dockerfile").write_text(f'FROM {tag}\nRUN ["python", "-c", "{DROP_BYTECODE}"]\n')
    variant = f"{IMAGE}:no-bytecode"
    docker_cli("build", "-q", "-t", variant, str(context), env=BUILD_ENV)
    return variant


def loopback_pull(reference: str, tag: str, scratch: Path) -> float:
    """The image removed from the daemon, then pulled by digest from loopback and run."""
    image_id = docker_cli("image", "inspect", "--format", "{{.Id}}", tag)
    docker_cli("rmi", "-f", image_id)
    return start_times(action_command(reference, scratch), 1, pull=reference).samples[0]


def measure(context: Path, repeats: int, builds: int) -> Result:
    load_before = [round(x, 2) for x in os.getloadavg()]
    client = docker.from_env()
    base = rootfs.build_image(client, "repro-gate-test/python", rootfs.PIP_PACKAGES)
    tag = f"{IMAGE}:latest"
    with tempfile.TemporaryDirectory(prefix="action-image-") as folder:
        scratch = Path(folder)
        build_samples = [round(timed_build(context, base, tag), 3) for _ in range(builds)]
        with loopback_registry(scratch) as registry:
            reference = push_by_digest(tag, registry)
            reference_times = start_times([base, "python", "-c", "print()"], repeats)
            prebuilt = start_times(action_command(reference, scratch), repeats, pull=reference)
            bare = start_times(action_command(reference, scratch), repeats)
            variant = no_bytecode_variant(tag, scratch)
            no_bytecode = start_times(action_command(variant, scratch), repeats)
            docker_cli("rmi", variant)
            sizes = (size_mb(tag), bytecode_mb(tag))
            pulled = loopback_pull(reference, tag, scratch)
            docker_cli("rmi", "-f", reference)  # the bench leaves no image of its own behind
    build = round(statistics.median(build_samples), 3)
    return Result(
        base_image=base, image_size_mb=sizes[0], bytecode_mb=sizes[1],
        build_seconds=build, build_samples=build_samples,
        pull_cached_seconds=round(statistics.median(prebuilt.pull_samples), 3),
        first_line_seconds=bare.median, first_line_samples=bare.samples,
        first_line=bare.first_line, prebuilt_seconds=prebuilt.median,
        dockerfile_seconds=round(build + bare.median, 3),
        reference_seconds=reference_times.median,
        prebuilt_samples=prebuilt.samples,
        prebuilt_over_reference=round(prebuilt.median / reference_times.median, 2),
        dockerfile_over_prebuilt=round((build + bare.median) / prebuilt.median, 1),
        no_bytecode_first_line_seconds=no_bytecode.median, loopback_pull_seconds=pulled,
        load_average_before=load_before,
        load_average_after=[round(x, 2) for x in os.getloadavg()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per start-time figure")
    parser.add_argument("--builds", type=int, default=1, help="--no-cache builds to time")
    parser.add_argument("--context", type=Path, default=ROOT,
                        help="build context with the Dockerfile (default: this repository)")
    args = parser.parse_args()
    print(json.dumps(asdict(measure(args.context, args.repeats, args.builds))))


if __name__ == "__main__":
    main()
