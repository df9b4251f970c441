"""Soak of the runner service: `repro-gate runner serve` runs `--cycles` job cycles (default 100)
on one slot, with the tests' stand-in runner image, against the tests' fake GitHub run in this
process; `--engine rootless` (the default) or `--engine shared`, as runner.yml's
`isolation.engine`.

Rootless: the host is set up by the real `repro-gate runner setup` (a config of its own: users
`rgsoak-slot<N>`, subordinate IDs from 1 700 000 000, a short work root under /tmp for the
engine's sockets), so the service runs the slot's runner containers on the slot's own rootless
engine under the slot's user. The images are built straight into that engine (its data root
stays between starts) while a temporary `repro-gate runner slot-endpoint` holds it up; a no-op
`nvidia-container-runtime-hook` (a shell script: the slot's user cannot reach this machine's
Python) on the PATH makes the device request by UUID start (tests/helpers/rootless_slots.py).

Shared: a private rootful dockerd (tests/helpers/gpu_dockerd.py) with a no-op hook on its PATH,
shared by the slots as before the rootless engines.

Both: the images are built from this machine's Python (tests/helpers/rootfs.py), then the
stand-in from tests/fixtures/standin_runner/, and the runner image is given by its local image
ID. The slot's health check passes unchecked (`health.allow_no_gpu`: no NVML here).

Measured, from outside the service:
- the service's resident memory (VmRSS of /proc/PID/status), threads and open file
  descriptors (/proc/PID/fd, by kind), sampled when each job's next registration arrives;
  averaged over the first ten and the last ten cycles (flat: `last/first` near 1), and listed
  per cycle (the first cycles fill connection pools: a ramp, then a plateau);
- rootless: at the same moments, the summed VmRSS of the slot's engine, i.e. every process whose
  user is the slot's user or one of its subordinate IDs (rootlesskit, slirp4netns, dockerd,
  containerd, shims, containers), first and last ten cycles, and by process name at the first
  and the last cycle;
- rootless: the processes of those users when the service has exited, and how long they take
  to go (up to 30 s);
- from each job's end (the runner container's `die` event on the event stream of the engine
  that ran it: the slot's own engine, or the private daemon) to the slot's next
  `POST …/generate-jitconfig` seen by the fake GitHub: median, p95, max (target under 5 s);
- the reference of the ratios: the stand-in started by hand on the same engine with the same
  mounts and device request (create, start, wait, remove), median of `--reference-runs`, half
  before the soak and half after; the service's cycle (registration to registration) is
  reported over it;
- the load average before and after (other engineers' tests share this machine).

Needs root; rootless: rootlesskit, slirp4netns, uidmap and docker.io's dockerd-rootless.sh;
shared: dockerd. Prints one JSON object; `--log` keeps the service's log.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import json
import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
# The test suite's helpers: image builder, private dockerd, slot endpoint, fake GitHub.
from helpers import rootfs  # noqa: E402
from helpers.fake_github import FakeGitHub  # noqa: E402
from helpers.gpu_dockerd import GpuDockerd, build_standin_image  # noqa: E402
from helpers.rootless_slots import HOOK, TOOLS, EndpointProcess, RootlessHost  # noqa: E402
from helpers.runner_files import RUNNER_IMAGE, SLOT_UUIDS, token_file, write_config  # noqa: E402

from repro_gate.runner import hook  # noqa: E402
from repro_gate.runner.runner_config import SUBORDINATE_ID_COUNT  # noqa: E402
from repro_gate.runner.slot_cycle import CONTAINER_SOCKET  # noqa: E402
from repro_gate.runner.slot_folders import SlotFolders, wipe  # noqa: E402
from repro_gate.runner.slots import Slot  # noqa: E402

TARGET_SECONDS = 5.0
WINDOW = 10  # cycles averaged at the start and at the end
SLOT = Slot(0, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3")
RUNNER_LABEL = "org.repro-gate.runner-slot"  # on every runner container the service starts
JOB = "echo job > out.txt"  # the stand-in's job: leaves a file the service must wipe
REGISTRATION = r"/actions/runners/generate-jitconfig$"
POLL_SECONDS = 0.05
STOP_SECONDS = 120
METRICS_LINE = re.compile(r"metrics on (http://\S+/metrics)")
API_VERSION = "1.41"  # fixed: a client exists before its engine does
# Rootless: the soak's own users and IDs, away from the tests' (rgtest-slot, 1 600 000 000) and
# the default (1 000 000 000), so neither is touched.
USER_PREFIX = "rgsoak-slot"
LINGER_SECONDS = 30.0  # how long the slot's processes may take to go after the service exits
SUBORDINATE_BASE = 1_700_000_000


@dataclass
class Sample:
    """The service process after a job's cleanup, when its next registration arrived."""

    cycle: int
    rss_kb: int
    threads: int
    fds: int
    fd_kinds: dict[str, int]  # socket, pipe, anon_inode, file, …: what a growth is made of
    engine_rss_kb: dict[str, int] | None  # rootless: the slot engine's processes, by name


@dataclass
class Soak:
    """What one soak saw."""

    dies: list[float] = field(default_factory=list)  # runner containers' `die`, epoch seconds
    samples: list[Sample] = field(default_factory=list)
    exit_code: int | None = None
    drain_seconds: float | None = None
    metrics_jobs_finished: float | None = None
    work_left: list[str] = field(default_factory=list)  # in the slot's work folder, at the end
    left: Leftovers | None = None  # rootless: the slot users' processes after the service


@dataclass
class Leftovers:
    """The slot users' processes when the service had exited, and how long they took to go."""

    at_exit: list[str]  # "pid name"
    gone_after_seconds: float | None  # None: still there after LINGER_SECONDS
    after_wait: list[str]


@dataclass
class Result:
    engine: str
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
    slot_engine_rss_kb_first: float | None
    slot_engine_rss_kb_last: float | None
    slot_engine_rss_last_over_first: float | None
    slot_engine_rss_kb_by_process_first: dict[str, int] | None  # the first sample's
    slot_engine_rss_kb_by_process_last: dict[str, int] | None  # the last sample's
    slot_user_processes_after_drain: Leftovers | None
    rss_kb_by_cycle: list[int]
    threads_by_cycle: list[int]
    fds_by_cycle: list[int]
    slot_engine_rss_kb_by_cycle: list[int | None]  # summed
    drain_exit_code: int | None
    drain_seconds: float | None
    github_violations: int
    work_left_after_drain: list[str]  # what the last job left in the slot's work folder
    metrics_jobs_finished: float | None
    load_average_before: list[float]
    load_average_after: list[float]
    target_seconds: float = TARGET_SECONDS
    window: int = WINDOW


def process_sample(pid: int, cycle: int, engine_rss: dict[str, int] | None) -> Sample:
    """VmRSS, threads and open descriptors of `pid`."""
    fields = proc_status(pid) or {}
    rss, threads = int(fields["VmRSS"].split()[0]), int(fields["Threads"])
    kinds: dict[str, int] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        kind = target.split(":", 1)[0] if ":" in target and not target.startswith("/") else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return Sample(cycle, rss, threads, sum(kinds.values()), kinds, engine_rss)


def proc_status(pid: int | str) -> dict[str, str] | None:
    """The fields of /proc/PID/status; None when the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    return dict(line.split(":", 1) for line in status.splitlines() if ":" in line)


@dataclass(frozen=True)
class SlotUsers:
    """The slot's user and its subordinate IDs: whoever runs the slot's engine and containers."""

    uid: int
    first_subordinate: int

    def owns(self, uid: int) -> bool:
        return uid == self.uid or 0 <= uid - self.first_subordinate < SUBORDINATE_ID_COUNT

    def processes(self) -> list[tuple[int, str, int]]:
        """(pid, name, VmRSS kB) of every process of these users."""
        found = []
        for entry in os.listdir("/proc"):
            fields = proc_status(entry) if entry.isdigit() else None
            if fields is None or not self.owns(int(fields["Uid"].split()[0])):
                continue
            rss = int(fields["VmRSS"].split()[0]) if "VmRSS" in fields else 0
            found.append((int(entry), fields["Name"].strip(), rss))
        return found

    def rss_kb(self) -> dict[str, int]:
        """VmRSS summed by process name."""
        found: dict[str, int] = {}
        for _, name, rss in self.processes():
            found[name] = found.get(name, 0) + rss
        return found

    def leftovers(self) -> Leftovers:
        """Who is left now, and after waiting up to LINGER_SECONDS for them to go."""
        at_exit = [f"{pid} {name}" for pid, name, _ in self.processes()]
        start = time.monotonic()
        left = at_exit
        while left and time.monotonic() - start < LINGER_SECONDS:
            time.sleep(0.1)
            left = [f"{pid} {name}" for pid, name, _ in self.processes()]
        gone = None if left else round(time.monotonic() - start, 2)
        return Leftovers(at_exit, gone, left)


def stand_in(client: docker.DockerClient) -> str:
    """The stand-in's local image ID (sha256:…), built into the engine behind `client`."""
    base = rootfs.build_image(client, "repro-gate-test/python", rootfs.PIP_PACKAGES)
    return str(client.images.get(build_standin_image(client, base)).id)


def reference_run(client: docker.DockerClient, image: str, work: Path, status: Path,
                  hooks: Path, extra: dict[str, dict[str, str]], network: str) -> float:
    """Seconds to run the stand-in by hand as the service does (one job, no service)."""
    config = {"runner_id": 1, "name": "reference", "scope": "repos/octo-org/trainer",
              "work_folder": str(work)}
    environment = {**hook.runner_environment(SLOT, allow_no_gpu=True),
                   "ACTIONS_RUNNER_INPUT_JITCONFIG":
                       base64.b64encode(json.dumps(config).encode()).decode(),
                   "STANDIN_JOB": JOB}
    volumes = {str(hooks): {"bind": hook.CONTAINER_HOOK_DIR, "mode": "ro"},
               str(work): {"bind": str(work), "mode": "rw"},
               str(status): {"bind": hook.CONTAINER_STATUS_DIR, "mode": "rw"}, **extra}
    request = docker.types.DeviceRequest(driver="nvidia", device_ids=[SLOT.uuid],
                                         capabilities=[["gpu"]])
    start = time.perf_counter()
    container = client.containers.create(
        image, ["/home/runner/run.sh"], environment=environment, volumes=volumes,
        network=network, device_requests=[request])
    container.start()
    code = container.wait(timeout=120)["StatusCode"]
    container.remove(force=True)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"the stand-in run by hand exited {code}")
    return round(elapsed, 3)


class DieEvents:
    """The `die` times of every runner container on the engine at `url`, read in a thread from
    `since` on (the slot's engine starts with the service, and again at each reset between
    jobs: the thread waits for it each time)."""

    def __init__(self, url: str, soak: Soak, since: float) -> None:
        self.client = docker.DockerClient(base_url=url, version=API_VERSION, timeout=120)
        self.soak = soak
        self.since = since
        self.stop = threading.Event()
        self.stream: Any = None
        self.thread = threading.Thread(target=self._read, name="die-events", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        """Until closed; the stream is read again each time the engine restarts (the reset
        between jobs), an event seen twice counted once."""
        seen: set[tuple[str, int]] = set()
        while not self.stop.is_set():
            try:
                self.client.ping()
            except (docker.errors.DockerException, requests.RequestException):
                time.sleep(0.1)
                continue
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                self.stream = self.client.events(
                    decode=True, since=int(self.since),
                    filters={"type": "container", "event": "die", "label": RUNNER_LABEL})
                for event in self.stream:
                    key = (str(event.get("id")), int(event["timeNano"]))
                    if key not in seen:
                        seen.add(key)
                        self.soak.dies.append(key[1] / 1e9)

    def close(self) -> None:
        self.stop.set()
        if self.stream is not None:
            with contextlib.suppress(Exception):
                self.stream.close()
        self.thread.join(5)
        self.client.close()


def run_service(config: Path, fake: FakeGitHub, soak: Soak, cycles: int, timeout: float,
                log: Path, env: dict[str, str],
                engine_rss: Callable[[], dict[str, int]] | None) -> None:
    """Start the service, sample it at each registration until `cycles` jobs ended and the
    next registration came, then drain it with SIGTERM."""
    with log.open("w") as handle:
        service = subprocess.Popen(
            [sys.executable, "-m", "repro_gate", "runner", "serve", "--config", str(config)],
            cwd=config.parent, stdout=handle, stderr=subprocess.STDOUT, env=env)
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
                    soak.samples.append(process_sample(
                        service.pid, seen - 1, engine_rss() if engine_rss else None))
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


def github_section(scratch: Path, fake: FakeGitHub) -> dict[str, object]:
    return {"repository": fake.repository, "api_url": fake.base_url,
            "auth": {"token_file": str(token_file(scratch))}}


class SharedEngine:
    """Every slot on one private rootful dockerd (`isolation.engine: shared`)."""

    name = "shared"

    def __init__(self, scratch: Path, storage_driver: str) -> None:
        self.scratch = scratch
        self.storage_driver = storage_driver
        self.daemon = GpuDockerd(storage_driver)
        self.work = scratch / "work" / "slot0" / "work"
        self.image = ""

    def start(self) -> None:
        self.daemon.start()
        self.image = stand_in(self.daemon.client)

    @property
    def url(self) -> str:
        return str(self.daemon.url)

    def reference(self, runs: int) -> list[float]:
        work, status, hooks = (self.scratch / "ref" / "work", self.scratch / "ref" / "status",
                               self.scratch / "hooks")
        for folder in (work, status):
            folder.mkdir(parents=True, exist_ok=True)
        hook.install(hooks)
        return [reference_run(self.daemon.client, self.image, work, status, hooks, {},
                              self.daemon.network) for _ in range(runs)]

    def config(self, fake: FakeGitHub) -> Path:
        return Path(write_config(
            self.scratch, github_section(self.scratch, fake), host="soakhost",
            work_root=str(self.scratch / "work"),
            slots={"source": "uuids", "uuids": [SLOT.uuid], "model": SLOT.model},
            runner={"image": self.image, "network": self.daemon.network,
                    "environment": {"STANDIN_JOB": JOB}},
            health={"allow_no_gpu": True}, docker_url=self.daemon.url,
            isolation={"engine": "shared"},
            metrics={"listen": "127.0.0.1:0"}, drain_timeout_seconds=30))

    def environment(self) -> dict[str, str]:
        return os.environ.copy()

    def engine_rss(self) -> Callable[[], dict[str, int]] | None:
        return None

    def left_after_drain(self) -> Leftovers | None:
        return None

    def close(self) -> None:
        self.daemon.close()


class RootlessEngine:
    """The slot on its own rootless engine under its own user (`isolation.engine: rootless`),
    set up by the real `runner setup`."""

    name = "rootless"

    def __init__(self, scratch: Path) -> None:
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            raise SystemExit(f"rootless: missing {', '.join(missing)} (Debian: rootlesskit"
                             " slirp4netns uidmap docker.io)")
        self.scratch = scratch
        scratch.chmod(0o711)  # the slot's user passes through to the work root and the hook
        self.work_root = scratch / "w"  # short: the engine's sockets live under it
        self.folders = SlotFolders.under(self.work_root, SLOT)
        self.work = self.folders.work
        hook_dir, hook_log = scratch / "bin", scratch / "hooklog" / "hook.log"
        hook_dir.mkdir()
        hook_log.parent.mkdir(mode=0o777)
        hook_log.parent.chmod(0o777)  # the slot's user appends to it
        hook_log.touch(mode=0o666)
        hook_log.chmod(0o666)
        nvidia = hook_dir / "nvidia-container-runtime-hook"
        nvidia.write_text(HOOK.replace("LOG", str(hook_log)), encoding="utf-8")
        nvidia.chmod(0o755)
        self.host = RootlessHost(scratch / "runner.yml", self.work_root, hook_dir, hook_log)
        self.image = RUNNER_IMAGE  # until built: setup and the endpoint do not need it
        self.storage_driver = ""
        self.users: SlotUsers | None = None
        self.fake: FakeGitHub | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.folders.engine_socket}"

    def start(self) -> None:
        """`runner setup`, then the images built into the slot's engine."""
        self._write_config()
        done = subprocess.run(
            [sys.executable, "-m", "repro_gate", "runner", "setup", "--config",
             str(self.host.config)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"runner setup exited {done.returncode}: {done.stderr.strip()}")
        entry = pwd.getpwnam(f"{USER_PREFIX}{SLOT.index}")
        self.users = SlotUsers(entry.pw_uid, SUBORDINATE_BASE + SLOT.index * SUBORDINATE_ID_COUNT)
        with self._engine() as client:
            self.image = stand_in(client)
            self.storage_driver = str(client.info().get("Driver"))

    @contextlib.contextmanager
    def _engine(self) -> Any:
        """A client of the slot's own engine (past the filter, as the service talks to it),
        held up by a temporary `runner slot-endpoint`."""
        endpoint = EndpointProcess(self.host, SLOT.index)
        client = docker.DockerClient(base_url=self.url, version=API_VERSION, timeout=300)
        try:
            yield client
        finally:
            client.close()
            code, errors = endpoint.stop()
            if code != 0:
                raise SystemExit(f"slot-endpoint exited {code}: {errors.strip()}")

    def reference(self, runs: int) -> list[float]:
        hooks = self.work_root / "hooks"
        hook.install(hooks)
        times = []
        with self._engine() as client:
            for _ in range(runs):
                times.append(reference_run(
                    client, self.image, self.folders.work, self.folders.status, hooks,
                    {str(self.folders.proxy_socket): {"bind": CONTAINER_SOCKET, "mode": "rw"}},
                    "none"))
                wipe(self.folders.work)
                wipe(self.folders.status)
        return times

    def _write_config(self, fake: FakeGitHub | None = None) -> Path:
        document: dict[str, object] = {
            "github": (github_section(self.scratch, fake) if fake else
                       {"repository": "octo-org/trainer",
                        "auth": {"token_file": str(token_file(self.scratch))}}),
            "host": "soakhost", "work_root": str(self.work_root),
            "slots": {"source": "uuids", "uuids": [SLOT.uuid], "model": SLOT.model},
            "runner": {"image": self.image, "network": "none",
                       "environment": {"STANDIN_JOB": JOB}},
            "health": {"allow_no_gpu": True},
            "isolation": {"engine": "rootless", "user_prefix": USER_PREFIX,
                          "subordinate_id_base": SUBORDINATE_BASE},
            "metrics": {"listen": "127.0.0.1:0"}, "drain_timeout_seconds": 30}
        self.host.config.write_text(yaml.safe_dump(document), encoding="utf-8")
        return Path(self.host.config)

    def config(self, fake: FakeGitHub) -> Path:
        return self._write_config(fake)

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.host.hook_dir}:{os.environ['PATH']}"}

    def engine_rss(self) -> Callable[[], dict[str, int]] | None:
        assert self.users is not None
        return self.users.rss_kb

    def left_after_drain(self) -> Leftovers | None:
        assert self.users is not None
        return self.users.leftovers()

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


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


def total(by_name: dict[str, int] | None) -> int | None:
    return None if by_name is None else sum(by_name.values())


def window_mean(samples: list[Sample]) -> float | None:
    known = [kb for sample in samples if (kb := total(sample.engine_rss_kb)) is not None]
    return round(statistics.mean(known)) if known else None


def summarise(soak: Soak, fake: FakeGitHub, cycles: int, log: Path, reference: list[float],
              engine: SharedEngine | RootlessEngine, load_before: list[float]) -> Result:
    registrations = sorted(seen.at for seen in fake.requests_to("POST", REGISTRATION))
    latencies = end_to_registration(soak.dies, registrations, cycles)
    if not latencies:
        raise SystemExit(f"no runner container's `die` event seen on {engine.url}")
    periods = [b - a for a, b in itertools.pairwise(registrations)][:cycles]
    first, last = soak.samples[:WINDOW], soak.samples[cycles - WINDOW:cycles]
    rss_first = statistics.mean(s.rss_kb for s in first)
    rss_last = statistics.mean(s.rss_kb for s in last)
    fds_first = statistics.mean(s.fds for s in first)
    fds_last = statistics.mean(s.fds for s in last)
    engine_first, engine_last = window_mean(first), window_mean(last)
    reference_median = statistics.median(reference)
    output = log.read_text(encoding="utf-8", errors="replace")
    return Result(
        engine=engine.name,
        cycles=cycles,
        jobs_completed=output.count('"hook_exit": 0, "job_exit": 0'),
        runner_image=engine.image, storage_driver=engine.storage_driver,
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
        slot_engine_rss_kb_first=engine_first, slot_engine_rss_kb_last=engine_last,
        slot_engine_rss_last_over_first=(round(engine_last / engine_first, 3)
                                         if engine_first and engine_last else None),
        slot_engine_rss_kb_by_process_first=first[0].engine_rss_kb,
        slot_engine_rss_kb_by_process_last=last[-1].engine_rss_kb,
        slot_user_processes_after_drain=soak.left,
        rss_kb_by_cycle=[s.rss_kb for s in soak.samples],
        threads_by_cycle=[s.threads for s in soak.samples],
        fds_by_cycle=[s.fds for s in soak.samples],
        slot_engine_rss_kb_by_cycle=[total(s.engine_rss_kb) for s in soak.samples],
        drain_exit_code=soak.exit_code, drain_seconds=soak.drain_seconds,
        github_violations=len(fake.violations),
        work_left_after_drain=soak.work_left,
        metrics_jobs_finished=soak.metrics_jobs_finished,
        load_average_before=load_before,
        load_average_after=[round(x, 2) for x in os.getloadavg()],
    )


def soak_once(engine: SharedEngine | RootlessEngine, fake: FakeGitHub,
              args: argparse.Namespace, load_before: list[float]) -> Result:
    engine.start()
    # Half the reference runs before the soak, half after: the load moves meanwhile.
    reference = engine.reference(args.reference_runs // 2)
    soak = Soak()
    log = args.log or engine.scratch / "service.log"
    config = engine.config(fake)
    events = DieEvents(engine.url, soak, time.time() - 1)
    try:
        run_service(config, fake, soak, args.cycles, args.timeout, log, engine.environment(),
                    engine.engine_rss())
    finally:
        events.close()
    soak.left = engine.left_after_drain()
    soak.work_left = sorted(str(p.relative_to(engine.work)) for p in engine.work.rglob("*"))
    reference += engine.reference(args.reference_runs - args.reference_runs // 2)
    return summarise(soak, fake, args.cycles, log, reference, engine, load_before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("rootless", "shared"), default="rootless",
                        help="runner.yml's isolation.engine (default: rootless)")
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--reference-runs", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for the soak")
    parser.add_argument("--storage-driver",
                        default=os.environ.get("DOCKERD_STORAGE_DRIVER", "overlay2"),
                        help="the shared engine's (the rootless engine picks its own)")
    parser.add_argument("--log", type=Path, help="keep the service's log here")
    args = parser.parse_args()
    if args.cycles < 2 * WINDOW:
        parser.error(f"--cycles: at least {2 * WINDOW} (two windows of {WINDOW})")
    if os.geteuid() != 0:
        parser.error("needs root (it sets up slot users or starts a private dockerd)")
    load_before = [round(x, 2) for x in os.getloadavg()]
    # Short: the rootless engine's sockets live under it (Unix socket paths hold 107 bytes).
    scratch = Path(tempfile.mkdtemp(prefix="rgsk-", dir="/tmp"))
    engine: SharedEngine | RootlessEngine = (
        RootlessEngine(scratch) if args.engine == "rootless"
        else SharedEngine(scratch, args.storage_driver))
    fake = FakeGitHub().start()
    try:
        result = soak_once(engine, fake, args, load_before)
    finally:
        fake.stop()
        engine.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(asdict(result), indent=2))


if __name__ == "__main__":
    main()
