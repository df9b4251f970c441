"""The reset between jobs, measured: what the service pays, per job, so that nothing a job made
or started outlives it on its slot (src/repro_gate/runner/slot_reset.py).

One rootless slot, set up by the real `repro-gate runner setup` (users `rgreset-slot<N>`,
subordinate IDs from 1 750 000 000, a short work root under /tmp) and held by the real
`repro-gate runner slot-endpoint`. Its runner image is the tests' torch image from the host's
daemon (about 0.9 GB, as large as actions/runner's; `--image` names another), loaded through
the endpoint and named in runner.yml by its ID, so that the reset keeps it.

Measured, as JSON:
- `load_seconds`: loading that image into the engine, the cost per job of a design that
  reloads the runner image into an emptied engine;
- `snapshot_copy_seconds`: copying the engine's data root (`cp -a`), the cost per job of a
  design that restores a data root snapshot;
- `reset_seconds`: `--resets` runs of `repro-gate runner reset-slot` while the endpoint holds
  the slot, each after a stand-in job left, on the engine itself and unlabelled, two running
  containers (one `restart: always`), a volume and a network: wall time of the command, and
  the reset's own time as the endpoint logged it; median and max;
- the load average before and after (other engineers' work shares this machine).

The job end -> next registration figure of the whole service is bench/runner_soak.py's
(`--cycles`), whose cycle now includes this reset. Needs root, rootlesskit, slirp4netns,
uidmap and docker.io's dockerd-rootless.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.rootless_slots import EndpointProcess, RootlessHost  # noqa: E402
from helpers.runner_files import SLOT_UUIDS, token_file  # noqa: E402

USER_PREFIX = "rgreset-slot"
SUBORDINATE_BASE = 1_750_000_000
TORCH_IMAGE = "repro-gate-test/torch:"
BUSY = ["python3", "-c", "import time\nwhile True: time.sleep(1)"]


def host_image(wanted: str | None) -> docker.models.images.Image:
    """The image to use as the runner image, from the host's daemon: `wanted`, or the tests'
    torch image (about 0.9 GB, as large as actions/runner's)."""
    client = docker.from_env()
    if wanted is not None:
        return client.images.get(wanted)
    found = [image for image in client.images.list() if any(
        tag.startswith(TORCH_IMAGE) for tag in image.tags)]
    if not found:
        raise SystemExit(f"no {TORCH_IMAGE}* image on the host's daemon: run the tests that"
                         " build it, or pass --image")
    return found[0]


def write_config(base: Path, image: str) -> Path:
    document = {
        "github": {"repository": "octo-org/trainer",
                   "auth": {"token_file": token_file(base).name}},
        "runner": {"image": image}, "slots": {"source": "uuids", "uuids": SLOT_UUIDS},
        "work_root": str(base / "w"), "health": {"allow_no_gpu": True},
        "isolation": {"user_prefix": USER_PREFIX, "subordinate_id_base": SUBORDINATE_BASE}}
    path = base / "runner.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def repro_gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], capture_output=True,
                          text=True, timeout=900, check=False)


def stand_in_job(engine: docker.DockerClient, image: str, round_: int) -> None:
    """What a job that got past the filter leaves: containers, a volume, a network."""
    engine.containers.run(image, BUSY, detach=True, network_mode="none",
                          restart_policy={"Name": "always"}, name=f"left-{round_}-always")
    engine.containers.run(image, BUSY, detach=True, network_mode="none", name=f"left-{round_}")
    engine.volumes.create(f"left-{round_}")
    engine.networks.create(f"left-{round_}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", help="a tag on the host's daemon (default: the tests' torch"
                                        " image)")
    parser.add_argument("--resets", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="rg-reset-", dir="/tmp"))
    base.chmod(0o711)
    source = host_image(args.image)
    image = str(source.id)
    archive = b"".join(source.save(named=False))
    config = write_config(base, image)
    done = repro_gate("runner", "setup", "--config", str(config))
    if done.returncode != 0:
        raise SystemExit(f"runner setup: {done.stderr.strip()}")
    host = RootlessHost(config, base / "w", base / "bin", base / "hook.log")
    (base / "bin").mkdir()
    endpoint = EndpointProcess(host, 0)
    engine_socket = f"unix://{host.folder(0)}/engine/run/docker.sock"
    result: dict[str, object] = {"image": source.tags[0] if source.tags else image,
                                 "image_mb": round(len(archive) / 2**20), "resets": args.resets}
    try:
        began = time.monotonic()
        endpoint.client.images.load(archive)
        result["load_seconds"] = round(time.monotonic() - began, 2)
        data = host.folder(0) / "engine" / "data"
        began = time.monotonic()
        subprocess.run(["cp", "-a", str(data), str(base / "snapshot")], check=True)
        result["snapshot_copy_seconds"] = round(time.monotonic() - began, 2)
        shutil.rmtree(base / "snapshot")
        walls = []
        for round_ in range(args.resets):
            engine = docker.DockerClient(base_url=engine_socket, timeout=120)
            stand_in_job(engine, image, round_)
            engine.close()
            began = time.monotonic()
            done = repro_gate("runner", "reset-slot", "--config", str(config), "--slot", "0")
            walls.append(round(time.monotonic() - began, 2))
            if done.returncode != 0:
                raise SystemExit(f"reset-slot exited {done.returncode}: {done.stdout}"
                                 f"{done.stderr}")
        _, log = endpoint.stop()
        own = [float(line.rsplit("(", 1)[1].split(" s)")[0]) for line in log.splitlines()
               if "reset: the engine is fresh (" in line]
        result["reset_seconds"] = {"command": walls, "median": statistics.median(walls),
                                   "max": max(walls), "logged": own}
    finally:
        if endpoint.running():
            endpoint.stop()
        shutil.rmtree(base, ignore_errors=True)
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
