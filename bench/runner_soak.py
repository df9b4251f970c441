"""Soak of the runner service: `repro-gate runner serve` runs `--cycles` job cycles (default 100)
on one slot, with the tests' stand-in runner image on a private Docker Engine, against the
tests' fake GitHub run in this process.

The private dockerd (tests/helpers/gpu_dockerd.py) has a no-op `nvidia-container-runtime-hook`,
so the runner containers' device requests by UUID start on this GPU-less machine; its images are
built into it directly (tests/helpers/rootfs.py: this machine's Python; then the stand-in from
tests/fixtures/standin_runner/), and the runner image is given by its local image ID. The slot's
health check passes unchecked (`health.allow_no_gpu`: no NVML here), so it adds no wait.

Measured, from outside the service:
- the service's resident memory (VmRSS of /proc/PID/status), threads and open file
  descriptors (/proc/PID/fd, by kind), sampled when each job's next registration arrives;
  averaged over the first ten and the last ten cycles (flat: `last/first` near 1), and listed
  per cycle (the first cycles fill connection pools: a ramp, then a plateau);
- from each job's end (the runner container's `die` event in the private daemon's event stream)
  to the slot's next `POST …/generate-jitconfig` seen by the fake GitHub: median, p95, max
  (target under 5 s);
- the reference of the ratios: the stand-in started by hand on the same daemon with the same
  mounts and device request (create, start, wait, remove), median of `--reference-runs`, half
  before the soak and half after; the service's cycle (registration to registration) is
  reported over it;
- the load average before and after (other engineers' tests share this machine).

Needs root and dockerd (Docker Engine 20.10 here); it starts its own private daemon and needs
no other. Prints one JSON object; `--log` keeps the service's log.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker
import docker.types
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
# The test suite's helpers: image builder, private dockerd, fake GitHub and runner.yml writer.
from helpers import rootfs  # noqa: E402
from helpers.fake_github import FakeGitHub  # noqa: E402
from helpers.gpu_dockerd import GpuDockerd, build_standin_image  # noqa: E402
from helpers.runner_files import SLOT_UUIDS, token_file, write_config  # noqa: E402

from repro_gate.runner import hook  # noqa: E402
from repro_gate.runner.slots import Slot  # noqa: E402

TARGET_SECONDS = 5.0
WINDOW = 10  # cycles averaged at the start and at the end
SLOT_UUID = SLOT_UUIDS[0]
MODEL = "NVIDIA H100 80GB HBM3"
RUNNER_LABEL = "org.repro-gate.runner-slot"  # on every runner container the service starts
JOB = "echo job > out.txt"  # the stand-in's job: leaves a file the service must wipe
REGISTRATION = r"/actions/runners/generate-jitconfig$"
POLL_SECONDS = 0.05
STOP_SECONDS = 120
METRICS_LINE = re.compile(r"metrics on (http://\S+/metrics)")


@dataclass
class Sample:
    """The service process after a job's cleanup, when its next registration arrived."""

    cycle: int
    rss_kb: int
    threads: int
    fds: int
    fd_kinds: dict[str, int]  # socket, pipe, anon_inode, file, …: what a growth is made of


@dataclass
class Soak:
    """What one soak saw."""

    dies: list[float] = field(default_factory=list)  # runner containers' `die`, epoch seconds
    samples: list[Sample] = field(default_factory=list)
    exit_code: int | None = None
    drain_seconds: float | None = None
    metrics_jobs_finished: float | None = None
    work_left: list[str] = field(default_factory=list)  # in the slot's work folder, at the end


@dataclass
class Result:
    cycles: int
    jobs_completed: int  # STANDIN-RESULT lines with hook and job exit 0 (up to the drain)
    runner_image: str
    storage_driver: str
    reference_seconds: float
    reference_samples: list[float]
    cycle_seconds_median: float
    cycle_over_reference: float
    end_to_registration_median: float
    end_to_registration_p95: float
    end_to_registration_max: float
    rss_kb_first: float
    rss_kb_last: float
    rss_last_over_first: float
    fds_first: float
    fds_last: float
    fds_last_minus_first: float
    fd_kinds_first: dict[str, int]
    fd_kinds_last: dict[str, int]
    rss_kb_by_cycle: list[int]
    threads_by_cycle: list[int]
    fds_by_cycle: list[int]
    drain_exit_code: int | None
    drain_seconds: float | None
    github_violations: int
    work_left_after_drain: list[str]  # what the last job left in the slot's work folder
    metrics_jobs_finished: float | None
    load_average_before: list[float]
    load_average_after: list[float]
    target_seconds: float = TARGET_SECONDS
    window: int = WINDOW


def process_sample(pid: int, cycle: int) -> Sample:
    """VmRSS, threads and open descriptors of `pid`."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss, threads = int(fields["VmRSS"].split()[0]), int(fields["Threads"])
    kinds: dict[str, int] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        kind = target.split(":", 1)[0] if ":" in target and not target.startswith("/") else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return Sample(cycle, rss, threads, sum(kinds.values()), kinds)


def runner_image(daemon: GpuDockerd) -> str:
    """The stand-in's local image ID (sha256:…), built into the private daemon."""
    base = rootfs.build_image(daemon.client, "repro-gate-test/python", rootfs.PIP_PACKAGES)
    return str(daemon.client.images.get(build_standin_image(daemon.client, base)).id)


def reference_run(daemon: GpuDockerd, image: str, scratch: Path) -> float:
    """Seconds to run the stand-in by hand as the service does (one job, no service)."""
    work, status, hooks = scratch / "ref" / "work", scratch / "ref" / "status", scratch / "hooks"
    for folder in (work, status):
        folder.mkdir(parents=True, exist_ok=True)
    hook.install(hooks)
    config = {"runner_id": 1, "name": "reference", "scope": "repos/octo-org/trainer",
              "work_folder": str(work)}
    environment = {**hook.runner_environment(Slot(0, SLOT_UUID, MODEL), allow_no_gpu=True),
                   "ACTIONS_RUNNER_INPUT_JITCONFIG":
                       base64.b64encode(json.dumps(config).encode()).decode(),
                   "STANDIN_JOB": JOB}
    volumes = {str(hooks): {"bind": hook.CONTAINER_HOOK_DIR, "mode": "ro"},
               str(work): {"bind": str(work), "mode": "rw"},
               str(status): {"bind": hook.CONTAINER_STATUS_DIR, "mode": "rw"}}
    request = docker.types.DeviceRequest(driver="nvidia", device_ids=[SLOT_UUID],
                                         capabilities=[["gpu"]])
    start = time.perf_counter()
    container = daemon.client.containers.create(
        image, ["/home/runner/run.sh"], environment=environment, volumes=volumes,
        network=daemon.network, device_requests=[request])
    container.start()
    code = container.wait(timeout=120)["StatusCode"]
    container.remove(force=True)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"the stand-in run by hand exited {code}")
    return round(elapsed, 3)


def follow_dies(daemon: GpuDockerd, soak: Soak) -> docker.types.CancellableStream:
    """Record the `die` time of every runner container, in a thread; close the stream to stop."""
    stream = daemon.client.events(decode=True, filters={
        "type": "container", "event": "die", "label": RUNNER_LABEL})

    def read() -> None:
        for event in stream:
            soak.dies.append(int(event["timeNano"]) / 1e9)

    threading.Thread(target=read, name="die-events", daemon=True).start()
    return stream


def service_config(scratch: Path, fake: FakeGitHub, daemon: GpuDockerd, image: str) -> Path:
    github = {"repository": fake.repository, "api_url": fake.base_url,
              "auth": {"token_file": token_file(scratch).name}}
    return write_config(
        scratch, github, host="soakhost", work_root=str(scratch / "work"),
        slots={"source": "uuids", "uuids": [SLOT_UUID], "model": MODEL},
        runner={"image": image, "network": daemon.network, "environment": {"STANDIN_JOB": JOB}},
        health={"allow_no_gpu": True}, docker_url=daemon.url,
        metrics={"listen": "127.0.0.1:0"}, drain_timeout_seconds=30)


def run_service(config: Path, fake: FakeGitHub, soak: Soak, cycles: int, timeout: float,
                log: Path) -> None:
    """Start the service, sample it at each registration until `cycles` jobs ended and the
    next registration came, then drain it with SIGTERM."""
    with log.open("w") as handle:
        service = subprocess.Popen(
            [sys.executable, "-m", "repro_gate", "runner", "serve", "--config", str(config)],
            cwd=config.parent, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    seen = 0
    try:
        while len(soak.samples) < cycles and time.monotonic() < deadline:
            if service.poll() is not None:
                raise SystemExit(f"the service exited {service.returncode}: {tail(log)}")
            registrations = len(fake.requests_to("POST", REGISTRATION))
            if registrations > seen:
                seen = registrations
                if seen >= 2:  # the registration after job seen-1 ended
                    soak.samples.append(process_sample(service.pid, seen - 1))
            time.sleep(POLL_SECONDS)
        soak.metrics_jobs_finished = scrape_jobs_finished(log)
    finally:
        soak.drain_seconds, soak.exit_code = drain(service)
    if len(soak.samples) < cycles:
        raise SystemExit(f"only {len(soak.samples)} cycles in {timeout:g} s: {tail(log)}")


def drain(service: subprocess.Popen[bytes]) -> tuple[float | None, int | None]:
    """SIGTERM: seconds to exit and the exit code (None, None when it had to be killed)."""
    if service.poll() is not None:
        return None, service.returncode
    start = time.perf_counter()
    service.send_signal(signal.SIGTERM)
    try:
        code = service.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        service.kill()
        service.wait()
        return None, None
    return round(time.perf_counter() - start, 3), code


def scrape_jobs_finished(log: Path) -> float | None:
    """The service's own count of finished jobs, from its /metrics."""
    found = METRICS_LINE.search(log.read_text(encoding="utf-8", errors="replace"))
    if found is None:
        return None
    text = requests.get(found.group(1), timeout=10).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("repro_gate_runner_jobs_finished_total{")]
    return sum(values) if values else None


def tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-2000:]


def end_to_registration(dies: list[float], registrations: list[float], cycles: int) -> list[float]:
    """Seconds from each of the first `cycles` jobs' ends to the next registration."""
    found = []
    for died in sorted(dies)[:cycles]:
        following = [at for at in registrations if at > died]
        if following:
            found.append(min(following) - died)
    return found


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summarise(soak: Soak, fake: FakeGitHub, cycles: int, log: Path, reference: list[float],
              image: str, driver: str, load_before: list[float]) -> Result:
    registrations = sorted(seen.at for seen in fake.requests_to("POST", REGISTRATION))
    latencies = end_to_registration(soak.dies, registrations, cycles)
    periods = [b - a for a, b in itertools.pairwise(registrations)][:cycles]
    first, last = soak.samples[:WINDOW], soak.samples[cycles - WINDOW:cycles]
    rss_first = statistics.mean(s.rss_kb for s in first)
    rss_last = statistics.mean(s.rss_kb for s in last)
    fds_first = statistics.mean(s.fds for s in first)
    fds_last = statistics.mean(s.fds for s in last)
    reference_median = statistics.median(reference)
    output = log.read_text(encoding="utf-8", errors="replace")
    return Result(
        cycles=cycles,
        jobs_completed=output.count('"hook_exit": 0, "job_exit": 0'),
        runner_image=image, storage_driver=driver,
        reference_seconds=round(reference_median, 3), reference_samples=reference,
        cycle_seconds_median=round(statistics.median(periods), 3),
        cycle_over_reference=round(statistics.median(periods) / reference_median, 2),
        end_to_registration_median=round(statistics.median(latencies), 3),
        end_to_registration_p95=round(percentile(latencies, 0.95), 3),
        end_to_registration_max=round(max(latencies), 3),
        rss_kb_first=round(rss_first), rss_kb_last=round(rss_last),
        rss_last_over_first=round(rss_last / rss_first, 3),
        fds_first=fds_first, fds_last=fds_last,
        fds_last_minus_first=round(fds_last - fds_first, 1),
        fd_kinds_first=first[0].fd_kinds, fd_kinds_last=last[-1].fd_kinds,
        rss_kb_by_cycle=[s.rss_kb for s in soak.samples],
        threads_by_cycle=[s.threads for s in soak.samples],
        fds_by_cycle=[s.fds for s in soak.samples],
        drain_exit_code=soak.exit_code, drain_seconds=soak.drain_seconds,
        github_violations=len(fake.violations),
        work_left_after_drain=soak.work_left,
        metrics_jobs_finished=soak.metrics_jobs_finished,
        load_average_before=load_before,
        load_average_after=[round(x, 2) for x in os.getloadavg()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--reference-runs", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for the soak")
    parser.add_argument("--storage-driver",
                        default=os.environ.get("DOCKERD_STORAGE_DRIVER", "overlay2"))
    parser.add_argument("--log", type=Path, help="keep the service's log here")
    args = parser.parse_args()
    if args.cycles < 2 * WINDOW:
        parser.error(f"--cycles: at least {2 * WINDOW} (two windows of {WINDOW})")
    load_before = [round(x, 2) for x in os.getloadavg()]
    daemon = GpuDockerd(args.storage_driver)
    fake = FakeGitHub().start()
    try:
        daemon.start()
        image = runner_image(daemon)
        with tempfile.TemporaryDirectory(prefix="rg-soak-") as folder:
            scratch = Path(folder)
            # Half the reference runs before the soak, half after: the load moves meanwhile.
            reference = [reference_run(daemon, image, scratch)
                         for _ in range(args.reference_runs // 2)]
            soak = Soak()
            stream = follow_dies(daemon, soak)
            log = args.log or scratch / "service.log"
            config = service_config(scratch, fake, daemon, image)
            run_service(config, fake, soak, args.cycles, args.timeout, log)
            stream.close()
            work = scratch / "work" / "slot0" / "work"
            soak.work_left = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
            reference += [reference_run(daemon, image, scratch)
                          for _ in range(args.reference_runs - args.reference_runs // 2)]
            result = summarise(soak, fake, args.cycles, log, reference, image,
                               args.storage_driver, load_before)
    finally:
        fake.stop()
        daemon.close()
    print(json.dumps(asdict(result), indent=2))


if __name__ == "__main__":
    main()
