"""`repro-gate runner serve` as a platform engineer runs it: a real subprocess (real signals,
real kill -9) against the fake GitHub, on a private dockerd whose no-op NVIDIA hook lets a GPU
device request start, with the stand-in runner image (tests/fixtures/standin_runner/)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import Answer, FakeGitHub
from helpers.gpu_dockerd import GpuDockerd
from helpers.runner_files import ASK_FOR_OTHER_GPU, SLOT_UUIDS, token_file, write_config
from helpers.serve_process import Serve

from repro_gate.runner.containers import (
    SERVICE_LABEL,
    SLOT_INDEX_LABEL,
    Conflict,
    Daemon,
    RunnerSpec,
    runner_container_name,
)
from repro_gate.runner.proxy.ownership import SLOT_LABEL

pytestmark = pytest.mark.docker
SERVICE = "repro-gate-gpuhost"  # name_prefix-host of write_config's runner.yml
RESULT = re.compile(r"slot (\d) runner: STANDIN-RESULT (\{.*\})$")
# The job: is the last job's file still there? Then ask the slot's proxy for the other slot's
# GPU, and (TEST_WAIT set) wait for a file the test writes into the workspace.
JOB_START = r'''
import http.client, json, os, socket, time
from pathlib import Path
here = Path.cwd()
print("MARKER-LEFT", "yes" if (here / "marker").exists() else "no", flush=True)
(here / "marker").write_text("written by the job")
mine = os.environ["REPRO_GATE_GPUS"]
other = [uuid for uuid in os.environ["TEST_SLOTS"].split() if uuid != mine][0]
'''
JOB_END = r'''
while os.environ.get("TEST_WAIT") and not (here / "release").exists():
    time.sleep(0.1)
'''
JOB = JOB_START + ASK_FOR_OTHER_GPU + JOB_END
# Slot 1's runner never takes a job (an idle runner); slot 0's is the stand-in.
IDLE_ON_SLOT1 = (
    f'if [ "$REPRO_GATE_SLOT_UUID" = "{SLOT_UUIDS[1]}" ]; then exec python3 -c "import signal,'
    ' sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(3600)"; fi;'
    ' exec /home/runner/run.sh')


@pytest.fixture
def work_root() -> Iterator[Path]:
    """Short (the proxy sockets live under it) and removed afterwards; files of any uid."""
    path = Path(tempfile.mkdtemp(prefix="rg-svc-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def serve(gpu_dockerd: GpuDockerd) -> Iterator[Callable[[Path], Serve]]:
    """Starts a service; those a test started are killed and their containers removed
    whatever happens."""
    started: list[Serve] = []

    def start(config: Path) -> Serve:
        started.append(Serve(config))
        return started[-1]

    yield start
    for service in started:
        service.stop()
    for container in service_containers(gpu_dockerd):
        container.remove(force=True)


def service_containers(daemon: GpuDockerd) -> list[Any]:
    return daemon.client.containers.list(all=True, filters={"label": f"{SERVICE_LABEL}={SERVICE}"})


def config(folder: Path, fake: FakeGitHub, daemon: GpuDockerd, image: str, work_root: Path,
           slots: int = 2, wait: bool = False, **runner: Any) -> Path:
    environment = {"STANDIN_JOB": 'python3 -c "$TEST_JOB"', "TEST_JOB": JOB,
                   "TEST_SLOTS": " ".join(SLOT_UUIDS), **({"TEST_WAIT": "1"} if wait else {})}
    return write_config(
        folder, {"repository": "octo-org/trainer", "api_url": fake.base_url,
                 "auth": {"token_file": token_file(folder).name}},
        runner={"image": image, "network": daemon.network, "crash_loop_limit": 2,
                "environment": {**environment, **runner.pop("environment", {})}, **runner},
        slots={"source": "uuids", "uuids": SLOT_UUIDS[:slots], "model": "NVIDIA H100 80GB HBM3"},
        health={"allow_no_gpu": True}, docker_url=daemon.url, work_root=str(work_root),
        isolation={"engine": "shared"},
        metrics={"listen": "127.0.0.1:0"}, drain_timeout_seconds=60)


def release(work_root: Path, slot: int) -> None:
    """The file a waiting job waits for, in its workspace (which the job may not have made
    yet: its hook status comes first)."""
    workspace = work_root / f"slot{slot}" / "work" / "repo" / "repo"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "release").write_text("go")


def registrations(fake: FakeGitHub, slot: int) -> list[Any]:
    return [sent for sent in fake.requests_to("POST", "generate-jitconfig$")
            if sent.body["name"] == f"{SERVICE}-slot{slot}"]


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the scraped exposition."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in:\n{text}")


def test_one_runner_per_slot_its_gpu_only_wiped_and_registered_again(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, wait=True)
    service = serve(path)
    for slot, uuid in enumerate(SLOT_UUIDS):
        service.wait_for(f"slot {slot}: job started on {uuid}$")
        service.wait_for(f"slot {slot} runner: PROXY-OTHER-GPU 403$")  # the job is waiting now
    containers = service_containers(gpu_dockerd)
    assert len(containers) == 2  # one runner per slot, nothing else
    seen = gpu_dockerd.visible_devices()
    for container in containers:
        slot = int(container.labels[SLOT_INDEX_LABEL])
        uuid = SLOT_UUIDS[slot]
        assert re.fullmatch(f"{SERVICE}-slot{slot}-[0-9a-f]{{12}}", container.name)
        assert container.labels[SLOT_LABEL] == uuid
        [request] = container.attrs["HostConfig"]["DeviceRequests"]
        assert (request["Driver"], request["DeviceIDs"], request["Capabilities"]) == (
            "nvidia", [uuid], [["gpu"]])
        assert seen[container.id] == uuid  # what the NVIDIA hook was asked for
        work = str(work_root / f"slot{slot}" / "work")
        mounts = {m["Destination"]: m["Source"] for m in container.attrs["Mounts"]}
        assert mounts[work] == work  # the work folder at its host path
        assert mounts["/var/run/docker.sock"] == str(
            work_root / f"slot{slot}" / "proxy" / "docker.sock")
        assert (Path(work) / "repo" / "repo" / "marker").exists()
    for slot in (0, 1):
        release(work_root, slot)
    for slot, uuid in enumerate(SLOT_UUIDS):
        service.wait_for(f"slot {slot}: job started on {uuid}$", count=2)
        [found] = service.wait_for(rf"slot {slot} runner: STANDIN-RESULT (\{{.*\}})$")
        first = json.loads(found.group(1))
        service.wait_for(rf"slot {slot} runner: repro-gate hook: .*{uuid}")  # the hook's own line
        assert first["github_env"] == f"REPRO_GATE_GPUS={uuid}\n"
        assert first["hook_exit"] == 0 and first["job_exit"] == 0
        # Registered again after the job, with the host work folder; the first one deleted.
        sent = registrations(github, slot)
        assert len(sent) == 2 and {s.body["work_folder"] for s in sent} == {
            str(work_root / f"slot{slot}" / "work")}
        assert first["runner_id"] not in github.actions.runners
        # The second job found no file of the first: the work folder was wiped before it.
        assert [m.group(1) for m in service.wait_for(
            rf"slot {slot} runner: MARKER-LEFT (\w+)", count=2)] == ["no", "no"]
        assert len(service.wait_for(rf"slot {slot} runner: PROXY-OTHER-GPU 403$", count=2)) == 2
    scraped = service.metrics()
    model = {"pool": "default", "gpu_model": "nvidia-h100-80gb-hbm3"}
    assert metric(scraped, "repro_gate_runner_jobs_started_total", **model) == 4
    assert metric(scraped, "repro_gate_runner_jobs_finished_total", outcome="completed",
                  **model) == 2
    assert metric(scraped, "repro_gate_runner_slots", state="busy", **model) == 2
    # SIGTERM while both jobs run: they may finish, then the service ends with nothing left.
    service.signal(signal.SIGTERM)
    service.wait_for("SIGTERM: draining")
    for slot in (0, 1):
        release(work_root, slot)
    assert service.finish() == 0, service.log()
    assert service_containers(gpu_dockerd) == []
    assert github.actions.runners == {}
    assert "Traceback" not in service.log()


def test_sigterm_drains_an_idle_runner_at_once_and_lets_a_busy_job_finish(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, wait=True,
                  command=["sh", "-c", IDLE_ON_SLOT1])
    service = serve(path)
    service.wait_for(f"slot 0: job started on {SLOT_UUIDS[0]}$")
    service.wait_for("slot 1: registered ")
    time.sleep(1)  # slot 1's runner container is up and idle
    service.signal(signal.SIGTERM)
    service.wait_for(f"slot 1: draining: deregistered the idle runner {SERVICE}-slot1")
    service.wait_for("slot 1: stopped$")
    service.wait_for("slot 0: draining: the busy job gets 60 s to finish")
    # The idle slot is gone while the busy job still runs; no new registration anywhere.
    assert [c.labels[SLOT_INDEX_LABEL] for c in service_containers(gpu_dockerd)] == ["0"]
    assert [r["name"] for r in github.actions.runners.values()] == [f"{SERVICE}-slot0"]
    release(work_root, 0)
    assert service.finish() == 0, service.log()
    result = json.loads(service.wait_for(RESULT.pattern)[0].group(2))
    assert result["job_exit"] == 0  # finished, not stopped
    assert service.wait_for("slot 0: job (\\w+) after")[0].group(1) == "completed"
    assert len(github.requests_to("POST", "generate-jitconfig$")) == 2
    assert service_containers(gpu_dockerd) == [] and github.actions.runners == {}
    assert [list((work_root / f"slot{slot}" / "work").iterdir()) for slot in (0, 1)] == [[], []]


def test_a_job_the_hook_refuses_is_counted_and_the_slot_goes_on(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    # The runtime hands the runner another GPU than the slot's: the hook must refuse the job.
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  environment={"STANDIN_NVIDIA_SMI": "1", "STANDIN_VISIBLE_GPUS": SLOT_UUIDS[1]})
    service = serve(path)
    [refused] = service.wait_for("slot 0: the hook refused the job: (.*)$")
    assert refused.group(1) == (f"GPU {SLOT_UUIDS[0]} is not visible in this runner"
                                f" (visible: {SLOT_UUIDS[1]})")
    result = json.loads(service.wait_for(RESULT.pattern)[0].group(2))
    assert result["hook_exit"] == 1 and result["job_exit"] is None  # no step ran
    service.wait_for("slot 0: job refused after")
    service.wait_for("slot 0: registered ", count=2)  # the slot is offered again
    scraped = service.metrics()
    model = {"pool": "default", "gpu_model": "nvidia-h100-80gb-hbm3"}
    assert metric(scraped, "repro_gate_runner_health_refusals_total", **model) >= 1
    assert metric(scraped, "repro_gate_runner_jobs_finished_total", outcome="refused",
                  **model) >= 1
    assert metric(scraped, "repro_gate_runner_jobs_finished_total", outcome="completed",
                  **model) == 0
    service.signal(signal.SIGTERM)
    assert service.finish() == 0, service.log()
    assert service_containers(gpu_dockerd) == [] and github.actions.runners == {}


def test_a_restart_after_kill_9_removes_the_orphans(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  wait=True)
    first = serve(path)
    first.wait_for("slot 0: job started on ")
    first.process.send_signal(signal.SIGKILL)
    first.finish()
    [orphan] = service_containers(gpu_dockerd)
    [old_runner] = github.actions.runners
    assert orphan.status == "running"  # kill -9 left the runner and its job behind
    second = serve(path)
    second.wait_for(f"orphan container removed: {orphan.name}$")
    second.wait_for(f"orphan registration deleted: {SERVICE}-slot0 \\(id {old_runner}\\)")
    second.wait_for("slot 0: job started on ")
    [fresh] = service_containers(gpu_dockerd)
    assert fresh.id != orphan.id and old_runner not in github.actions.runners
    second.signal(signal.SIGTERM)
    second.wait_for("draining")
    release(work_root, 0)
    assert second.finish() == 0, second.log()
    # The new job found nothing of the killed one's: the work folder was wiped at start-up.
    assert [m.group(1) for m in second.wait_for("slot 0 runner: MARKER-LEFT (\\w+)")] == ["no"]
    result = json.loads(second.wait_for(RESULT.pattern)[0].group(2))
    assert result["github_env"] == f"REPRO_GATE_GPUS={SLOT_UUIDS[0]}\n"
    assert service_containers(gpu_dockerd) == [] and github.actions.runners == {}


def test_a_docker_daemon_restart_mid_job_is_waited_for_and_the_slot_goes_on(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  wait=True)
    service = serve(path)
    service.wait_for("slot 0 runner: PROXY-OTHER-GPU 403$")
    [before] = service_containers(gpu_dockerd)
    gpu_dockerd.restart()  # the daemon stops its containers on the way down
    service.wait_for(f"slot 0: the Docker daemon at {gpu_dockerd.url} does not answer")
    service.wait_for("slot 0: the Docker daemon answers again")
    service.wait_for("slot 0: job crashed after")  # its runner died with the daemon
    service.wait_for("slot 0: job started on ", count=2)  # cleaned, registered again
    [after] = service_containers(gpu_dockerd)
    assert after.id != before.id and len(registrations(github, 0)) == 2
    service.signal(signal.SIGTERM)
    service.wait_for("draining")
    release(work_root, 0)
    assert service.finish() == 0, service.log()
    assert service_containers(gpu_dockerd) == [] and github.actions.runners == {}


@pytest.fixture
def live_restore_dockerd(gpu_dockerd: GpuDockerd, standin_runner_image: str
                         ) -> Iterator[GpuDockerd]:
    """A second private daemon whose containers outlive its restarts (`live-restore`)."""
    daemon = GpuDockerd(gpu_dockerd.storage_driver)
    (daemon.root / "daemon.json").write_text('{"live-restore": true}\n', encoding="utf-8")
    try:
        daemon.start()
        daemon.pull(standin_runner_image)
        yield daemon
    finally:
        daemon.close()


def test_with_live_restore_the_runner_outlives_a_daemon_restart(
    tmp_path: Path, github: FakeGitHub, live_restore_dockerd: GpuDockerd,
    standin_runner_image: str, work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    daemon = live_restore_dockerd
    path = config(tmp_path, github, daemon, standin_runner_image, work_root, slots=1, wait=True)
    service = serve(path)
    service.wait_for("slot 0 runner: PROXY-OTHER-GPU 403$")
    [before] = service_containers(daemon)
    daemon.restart()
    before.reload()
    assert before.status == "running"  # kept through the restart
    release(work_root, 0)
    # The job finishes in the same runner, and its last line, written after the restart,
    # still reaches the log: the copy of the runner's output follows it again.
    result = json.loads(service.wait_for(RESULT.pattern)[0].group(2))
    assert result["job_exit"] == 0
    assert service.wait_for("slot 0: job (\\w+) after")[0].group(1) == "completed"
    service.wait_for("slot 0: job started on ", count=2)  # and the slot goes on
    service.signal(signal.SIGTERM)
    service.wait_for("draining")
    release(work_root, 0)
    assert service.finish() == 0, service.log()
    assert service_containers(daemon) == [] and github.actions.runners == {}


def test_registration_through_502_429_and_a_refusal(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    # 502 and 429 the client retries itself; the 422 it gives up on, and the slot tries again.
    github.script("POST", "generate-jitconfig$", Answer(502, body={"message": "Bad Gateway"}),
                  Answer(429, headers={"Retry-After": "1"}, body={"message": "rate limit"}),
                  Answer(422, body={"message": "Validation Failed"}))
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  wait=True)
    service = serve(path)
    service.wait_for(r"slot 0: registration failed \(refused\): POST .*HTTP 422: Validation"
                     " Failed; next try in 2 s")
    service.wait_for("slot 0: job started on ")
    sent = github.requests_to("POST", "generate-jitconfig$")
    assert len(sent) == 4
    assert sent[2].at - sent[1].at >= 1.0  # Retry-After honoured
    scraped = service.metrics()
    assert metric(scraped, "repro_gate_runner_registration_failures_total", pool="default") == 1
    service.signal(signal.SIGINT)
    service.wait_for("SIGINT: draining")
    release(work_root, 0)
    assert service.finish() == 0, service.log()


def test_malformed_github_answers_are_counted_and_the_slot_goes_on(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    # Each answered once, then GitHub answers as described: the slot registers and runs a job.
    github.script("POST", "generate-jitconfig$",
                  Answer(201, raw=b"<html>upstream error</html>"),
                  Answer(201, body={"runner": {"id": "23", "name": f"{SERVICE}-slot0"},
                                    "encoded_jit_config": "e30="}),
                  Answer(201, raw=b"[" * (5 * 1024 * 1024), length=False))
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  wait=True)
    service = serve(path)
    failed = service.wait_for(r"slot 0: registration failed \(malformed\): POST \S+: HTTP 201:"
                              r" (.*); next try in (\d+) s$", count=3)
    assert [(m.group(1), m.group(2)) for m in failed] == [
        ("the answer is not JSON", "2"),
        ("the answer's runner has id as a string, not a whole number", "4"),
        ("the answer is larger than 4 MiB: not read", "8")]
    service.wait_for(f"slot 0: job started on {SLOT_UUIDS[0]}$")
    scraped = service.metrics()
    model = {"pool": "default", "gpu_model": "nvidia-h100-80gb-hbm3"}
    assert metric(scraped, "repro_gate_runner_registration_failures_total", **model) == 3
    kinds = "repro_gate_runner_registration_failure_kinds_total"
    assert metric(scraped, kinds, kind="malformed", **model) == 3
    assert metric(scraped, kinds, kind="refused", **model) == 0
    assert metric(scraped, "repro_gate_runner_slots", state="busy", **model) == 1
    service.signal(signal.SIGTERM)
    service.wait_for("draining")
    release(work_root, 0)
    assert service.finish() == 0, service.log()
    assert "Traceback" not in service.log() and "internal error" not in service.log()


def test_a_container_with_the_runner_name_cannot_block_the_slot(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    # What a job could create through its proxy: a container named as the runner's used to be.
    squatter = gpu_dockerd.client.containers.create(standin_runner_image, ["true"],
                                                    name=f"{SERVICE}-slot0", network_mode="none")
    try:
        path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                      wait=True)
        service = serve(path)
        service.wait_for(f"slot 0: job started on {SLOT_UUIDS[0]}$")
        [first] = service_containers(gpu_dockerd)
        release(work_root, 0)
        service.wait_for(f"slot 0: job started on {SLOT_UUIDS[0]}$", count=2)
        [second] = service_containers(gpu_dockerd)
        names = [first.name, second.name]
        assert all(re.fullmatch(f"{SERVICE}-slot0-[0-9a-f]{{12}}", name) for name in names)
        assert first.name != second.name  # a new name each cycle: none a job could take first
        scraped = service.metrics()
        assert metric(scraped, "repro_gate_runner_runner_crashes_total", pool="default") == 0
        assert metric(scraped, "repro_gate_runner_jobs_finished_total", outcome="completed",
                      pool="default") == 1
        service.signal(signal.SIGTERM)
        service.wait_for("draining")
        release(work_root, 0)
        assert service.finish() == 0, service.log()
        squatter.reload()  # found and cleaned by label and ID only: someone else's is kept
        assert squatter.name == f"{SERVICE}-slot0"
    finally:
        squatter.remove(force=True)


def test_a_taken_name_is_a_conflict_the_slot_tries_again_with_another(
    gpu_dockerd: GpuDockerd, standin_runner_image: str
) -> None:
    stem = f"{SERVICE}-slot0"
    names = {runner_container_name(stem) for _ in range(100)}
    assert len(names) == 100 and all(re.fullmatch(f"{stem}-[0-9a-f]{{12}}", n) for n in names)
    taken = gpu_dockerd.client.containers.create(standin_runner_image, ["true"],
                                                 name=names.pop(), network_mode="none")
    daemon = Daemon(gpu_dockerd.url)
    spec = RunnerSpec(taken.name, standin_runner_image, ("true",), (), "none",
                      ((SLOT_LABEL, SLOT_UUIDS[0]),), SLOT_UUIDS[0], ())
    try:
        with pytest.raises(Conflict, match=f"create {taken.name}: Conflict"):
            daemon.create_runner(spec)  # SlotCycle tries another name: not a crash
        other = names.pop()
        assert daemon.create_runner(dataclasses.replace(spec, name=other)) != taken.id
        # Clean-up goes by label: the other container, whatever its name, is not the slot's.
        assert daemon.remove_labelled(f"{SLOT_LABEL}={SLOT_UUIDS[0]}") == [other]
        taken.reload()
    finally:
        daemon.close()
        taken.remove(force=True)


def test_a_crash_looping_runner_marks_its_slot_unhealthy(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, serve: Callable[[Path], Serve],
) -> None:
    path = config(tmp_path, github, gpu_dockerd, standin_runner_image, work_root, slots=1,
                  environment={"STANDIN_CRASH": "1"})
    service = serve(path)
    service.wait_for("slot 0: unhealthy: the runner container crashed 2 times in a row without"
                     " taking a job; the slot stays unhealthy until the service restarts")
    assert len(service.wait_for("slot 0 runner: standin runner: STANDIN_CRASH=1", 2)) == 2
    scraped = service.metrics()
    model = {"pool": "default", "gpu_model": "nvidia-h100-80gb-hbm3"}
    assert metric(scraped, "repro_gate_runner_slots", state="unhealthy", **model) == 1
    assert metric(scraped, "repro_gate_runner_runner_crashes_total", **model) == 2
    assert len(github.requests_to("POST", "generate-jitconfig$")) == 2  # no third try
    assert service_containers(gpu_dockerd) == [] and github.actions.runners == {}
    service.signal(signal.SIGTERM)
    assert service.finish() == 0, service.log()


@pytest.mark.parametrize("problem", ["own variable", "no daemon", "no image"])
def test_what_cannot_start_is_one_line_and_exit_2(
    tmp_path: Path, github: FakeGitHub, gpu_dockerd: GpuDockerd, standin_runner_image: str,
    work_root: Path, problem: str,
) -> None:
    image, url, environment = standin_runner_image, gpu_dockerd.url, {}
    if problem == "own variable":
        environment = {"ACTIONS_RUNNER_INPUT_JITCONFIG": "mine"}
    elif problem == "no daemon":
        url = f"unix://{tmp_path}/missing.sock"
    else:
        image = "127.0.0.1:9/absent/runner@sha256:" + "0" * 64
    path = config(tmp_path, github, gpu_dockerd, image, work_root, slots=1,
                  environment=environment)
    text = path.read_text().replace(gpu_dockerd.url, url)
    path.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "repro_gate", "runner", "serve", "--config", str(path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=os.environ)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    expected = {
        "own variable": "runner.environment.ACTIONS_RUNNER_INPUT_JITCONFIG: is set by the"
                        " service itself",
        "no daemon": f"docker_url unix://{tmp_path}/missing.sock: the Docker daemon cannot be"
                     " reached",
        "no image": f"runner.image {image}: cannot be pulled",
    }[problem]
    assert result.stderr.startswith("repro-gate: error: ") and expected in result.stderr
    assert github.seen == [] and list(work_root.iterdir()) == []  # nothing started
