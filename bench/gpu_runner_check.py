"""GPU check of the runner service: slots, host health, one GPU per runner container, the hook.

On a GPU host with the NVIDIA driver, Docker and the NVIDIA Container Toolkit, it does what the
service does for each slot, without GitHub:

1. discovers the slots through NVML (`runner.slots`; one per GPU, or per MIG instance with
   --mig) and runs the service's host health check (`runner.health.check_slot`) on each;
2. starts one container per slot on the local Docker with the service's device request,
   `DeviceRequest(driver="nvidia", device_ids=[<slot uuid>], capabilities=[["gpu"]])`, the hook
   folder and a status folder mounted where the service mounts them, and runs `nvidia-smi -L`
   in it (the NVIDIA runtime hook mounts nvidia-smi, so a CUDA-less image will do): it must list
   exactly that slot's UUID (and, for a MIG slot, its parent GPU);
3. runs the job-started hook in that container as the runner would, with the slot's own UUID
   (it must accept, write REPRO_GATE_GPUS=<uuid> to $GITHUB_ENV and leave an `accepted` status)
   and with another slot's UUID (a made-up one on a one-GPU host: it must refuse and leave a
   `refused` status).

Prints one JSON object (`slots`, `checks`). Exit codes: 0 every check holds; 1 a check failed;
2 Docker failed (one line on stderr); 3 NVML does not answer here (one line on stderr, nothing
run); 4 bad arguments.
Usage: python bench/gpu_runner_check.py [--image python:3.12-slim] [--mig] [--docker-url URL]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from repro_gate.errors import ConfigError, one_line
from repro_gate.runner import hook
from repro_gate.runner.health import HealthReport, check_slot
from repro_gate.runner.runner_config import (
    DEFAULT_DOCKER_URL,
    HealthSettings,
    SlotSettings,
    SlotSource,
)
from repro_gate.runner.slots import Slot, read_devices, slots_from_raw

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_NO_GPU, EXIT_USAGE = 0, 1, 2, 3, 4
DEFAULT_IMAGE = "python:3.12-slim"  # python3 for the hook; nvidia-smi comes from the runtime
OUTSIDER = "GPU-00000000-0000-4000-8000-000000000000"  # "another slot" on a one-GPU host
CHECK_LABEL = "org.repro-gate.gpu-check"  # not the service's labels: its clean-up leaves it be
KEEP_ALIVE = ["python3", "-c", "import time; time.sleep(3600)"]  # the image needs no coreutils
LISTED_UUID = re.compile(r"UUID: ((?:GPU|MIG)-[0-9A-Fa-f-]+)")


class CheckError(Exception):
    """Docker could not do what the check needs: exit EXIT_ERROR with this one line."""


@dataclass(frozen=True)
class HookRun:
    uuid: str  # the REPRO_GATE_SLOT_UUID it ran with
    exit_code: int
    github_env: str
    status: hook.HookStatus | None
    output: str


@dataclass(frozen=True)
class SlotCheck:
    slot: Slot
    health: HealthReport
    health_seconds: float
    listed: list[str]  # the UUIDs `nvidia-smi -L` printed in the slot's container
    own: HookRun
    other: HookRun

    def exclusive(self) -> bool:
        expected = {self.slot.uuid, *([self.slot.parent_uuid] if self.slot.parent_uuid else [])}
        return sorted(self.listed) == sorted(expected)

    def accepted(self) -> bool:
        return (self.own.exit_code == 0
                and self.own.status == hook.HookStatus(hook.HookOutcome.ACCEPTED, self.slot.uuid)
                and self.own.github_env == f"REPRO_GATE_GPUS={self.slot.uuid}\n")

    def refused(self) -> bool:
        status = self.other.status
        return (self.other.exit_code == 1 and self.other.github_env == ""
                and status is not None and status.outcome is hook.HookOutcome.REFUSED)


def discover(source: SlotSource) -> list[Slot]:
    """This host's slots; exits EXIT_NO_GPU with one line where NVML does not answer."""
    raw = read_devices()
    try:
        if "error" in raw:
            raise ConfigError(raw["error"])
        return slots_from_raw(raw, SlotSettings(source))
    except ConfigError as error:
        print(f"gpu_runner_check: no GPU here: {error}: nothing was run", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)


def run_in(container: Any, command: list[str], environment: dict[str, str] | None = None
           ) -> tuple[int, str]:
    exit_code, output = container.exec_run(command, environment=environment or {})
    return int(exit_code), output.decode("utf-8", errors="replace")


def run_hook(container: Any, slot: Slot, uuid: str, status_dir: Path, name: str) -> HookRun:
    """The installed hook as the runner runs it, with `uuid` as the slot's UUID."""
    (status_dir / hook.STATUS_FILE).unlink(missing_ok=True)  # the service clears it per job
    # $GITHUB_ENV in the mounted status folder, so it is read here without tools in the image.
    github_env = status_dir / f"github_env_{name}"
    environment = {**hook.runner_environment(Slot(slot.index, uuid, slot.model)),
                   "GITHUB_ENV": f"{hook.CONTAINER_STATUS_DIR}/{github_env.name}"}
    exit_code, output = run_in(container, ["sh", environment[hook.HOOK_VARIABLE]], environment)
    written = github_env.read_text(encoding="utf-8") if github_env.exists() else ""
    return HookRun(uuid, exit_code, written, hook.read_status(status_dir), output.strip())


def check(client: Any, image: str, slot: Slot, other_uuid: str, hook_dir: Path) -> SlotCheck:
    """Health, then the slot's container: its GPU listing and the hook both ways."""
    from docker.types import DeviceRequest  # docker is a dependency of the runner service

    started = time.monotonic()
    health = check_slot(slot, HealthSettings(), wait_for_processes=False)
    health_seconds = round(time.monotonic() - started, 3)
    status_dir = Path(tempfile.mkdtemp(prefix=f"gpu-runner-check-status{slot.index}-"))
    status_dir.chmod(0o777)  # the image's user writes there, as the runner's user does
    container = client.containers.run(
        image, KEEP_ALIVE, detach=True, network_mode="none",
        device_requests=[DeviceRequest(driver="nvidia", device_ids=[slot.uuid],
                                       capabilities=[["gpu"]])],
        volumes={str(hook_dir): {"bind": hook.CONTAINER_HOOK_DIR, "mode": "ro"},
                 str(status_dir): {"bind": hook.CONTAINER_STATUS_DIR, "mode": "rw"}},
        labels={CHECK_LABEL: slot.uuid})
    try:
        exit_code, listing = run_in(container, ["nvidia-smi", "-L"])
        if exit_code != 0:
            raise CheckError(f"nvidia-smi -L exited {exit_code} in the container of slot"
                             f" {slot.index}: {one_line(listing)}")
        return SlotCheck(slot, health, health_seconds, LISTED_UUID.findall(listing),
                         run_hook(container, slot, slot.uuid, status_dir, "own"),
                         run_hook(container, slot, other_uuid, status_dir, "other"))
    finally:
        container.remove(force=True)
        shutil.rmtree(status_dir, ignore_errors=True)


def report(checks: list[SlotCheck]) -> dict[str, Any]:
    slots = [{**asdict(c), "exclusive": c.exclusive(), "accepted": c.accepted(),
              "refused": c.refused()} for c in checks]
    return {"slots": slots, "checks": {
        "health_checked": all(c.health.checked for c in checks),
        "slots_healthy": all(c.health.healthy for c in checks),
        "one_gpu_per_container": all(c.exclusive() for c in checks),
        "hook_accepts_own_gpu": all(c.accepted() for c in checks),
        "hook_refuses_other_gpu": all(c.refused() for c in checks)}}


class _Parser(argparse.ArgumentParser):
    """Bad arguments exit EXIT_USAGE (argparse's own 2 is EXIT_ERROR here)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"gpu_runner_check: {message}\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE,
                        help="image of the per-slot containers; needs python3 and sh")
    parser.add_argument("--mig", action="store_true", help="one slot per MIG instance")
    parser.add_argument("--docker-url", default=DEFAULT_DOCKER_URL)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    slots = discover(SlotSource.MIG if args.mig else SlotSource.GPUS)
    import docker

    try:
        client = docker.DockerClient(base_url=args.docker_url)
        client.ping()
        with tempfile.TemporaryDirectory(prefix="gpu-runner-check-hooks-") as folder:
            hook_dir = hook.install(Path(folder)).script.parent
            Path(folder).chmod(0o755)
            checks = [check(client, args.image, slot,
                            slots[(n + 1) % len(slots)].uuid if len(slots) > 1 else OUTSIDER,
                            hook_dir) for n, slot in enumerate(slots)]
    except (docker.errors.DockerException, CheckError) as error:
        print(f"gpu_runner_check: {one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    result = report(checks)
    print(json.dumps(result, indent=2, default=str))
    return EXIT_OK if all(result["checks"].values()) else EXIT_CHECK_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
