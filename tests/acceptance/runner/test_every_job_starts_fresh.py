"""Every job on a slot starts from nothing, on real rootless slots (`runner setup`,
`runner slot-endpoint`, `runner reset-slot`), with endpoints of this module's own: a reset
removes the images other modules' shared endpoints hold.

Job 1 first tries to swap a bind's checked folder for a link (to the engine's socket, the
host's /tmp and /etc); then, as if it had got past the filter, leaves on the engine itself an
unlabelled `restart: always` container that watches for the next runner's environment, a volume
and a network. `reset-slot` runs while the endpoint holds the slot; the next runner starts.
On a slot dedicated to one repository, only that repository's caches, as the filter labelled
them, survive the reset.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest
import yaml
from helpers.docker_fixtures import PinnedImage
from helpers.gpu_dockerd import remove_later
from helpers.rootless_slots import (
    EndpointProcess,
    RootlessHost,
    load_image,
    repro_gate,
    write_rootless_config,
)

pytestmark = pytest.mark.docker
SECRET = "next-runner-secret-5f3a"
DEDICATED = "octo-org/trainer"
# Job 1's watcher, left on the engine past the filter with the engine's socket: every 0.2 s it
# writes the environment of every container it can list into the work folder.
WATCHER = r"""
import http.client, json, socket, time
class Engine(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/engine/docker.sock")
def get(path):
    connection = Engine("engine")
    connection.request("GET", path)
    return connection.getresponse().read()
while True:
    try:
        seen = []
        for item in json.loads(get("/containers/json")):
            seen += json.loads(get(f"/containers/{item['Id']}/json"))["Config"]["Env"] or []
        open("/work/stolen", "a").write("\n".join(seen) + "\n")
    except Exception as error:
        open("/work/stolen", "a").write(f"alive {error}\n")
    time.sleep(0.2)
"""
LIST_PROBE = "import os; print(sorted(os.listdir('/probe')))"


def script(*parts: str) -> list[str]:
    return ["python3", "-c", "\n".join(parts)]


@dataclass(frozen=True)
class FreshSlot:
    """A rootless slot whose runner image is the test's Python image (kept by the reset)."""

    host: RootlessHost
    image: str
    work: Path
    engine_run: Path


def slot_with(rootless_host: RootlessHost, image: str, **isolation: object
              ) -> Iterator[FreshSlot]:
    """A work root of its own on the set-up host, its runner.yml naming `image` by ID."""
    base = Path(tempfile.mkdtemp(prefix="rg-fresh-", dir="/tmp"))
    base.chmod(0o711)
    config = write_rootless_config(base, base / "w", **isolation)
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document["runner"]["image"] = image
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    host = RootlessHost(config, base / "w", rootless_host.hook_dir, rootless_host.hook_log)
    yield FreshSlot(host, image, host.folder(0) / "work", host.folder(0) / "engine" / "run")
    remove_later(base)


def engine_of(slot: FreshSlot) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{slot.engine_run}/docker.sock", timeout=120)


def output_of(container: docker.models.containers.Container) -> str:
    container.start()
    container.wait(timeout=60)
    return str(container.logs().decode(errors="replace"))


@dataclass(frozen=True)
class JobOne:
    """What job 1's swaps saw, what reset-slot said, and what the engine held afterwards."""

    swaps: dict[str, str]  # the link's target -> what the container listed at /probe
    reset_code: int
    reset_output: str
    containers: list[str]
    volumes: list[str]
    networks: list[str]
    images: list[str]
    next_runner_answers: bool
    work_folder: list[str]


@pytest.fixture(scope="module")
def fresh_slot(rootless_host: RootlessHost, docker_client: docker.DockerClient,
               python_image: PinnedImage) -> Iterator[FreshSlot]:
    image = str(docker_client.images.get(python_image.tag).id)
    yield from slot_with(rootless_host, image)


@pytest.fixture(scope="module")
def job_one(fresh_slot: FreshSlot, docker_client: docker.DockerClient,
            python_image: PinnedImage) -> JobOne:
    endpoint = EndpointProcess(fresh_slot.host, 0)
    try:
        load_image(docker_client, python_image, endpoint.client)
        swaps = swap_attempts(endpoint.client, fresh_slot)
        engine = engine_of(fresh_slot)
        leave_behind(engine, fresh_slot)
        time.sleep(1)  # the watcher runs
        done = repro_gate("runner", "reset-slot", "--config", str(fresh_slot.host.config),
                          "--slot", "0", timeout=300)
        engine.close()
        engine = engine_of(fresh_slot)
        # The next runner, through the same DOCKER_HOST, with a secret in its environment.
        runner = endpoint.client.containers.run(
            fresh_slot.image, ["python3", "-c", "import time; time.sleep(3)"],
            environment={"ACTIONS_RUNNER_INPUT_JITCONFIG": SECRET}, detach=True,
            network_mode="none")
        time.sleep(1.5)
        answers = bool(endpoint.client.ping())
        runner.remove(force=True)
        found = JobOne(
            swaps, done.returncode, done.stdout + done.stderr,
            [c.name for c in engine.containers.list(all=True)],
            [v.name for v in engine.volumes.list()],
            sorted(n.name for n in engine.networks.list()),
            [str(i.id) for i in engine.images.list()], answers,
            sorted(p.name for p in fresh_slot.work.iterdir()))
        engine.close()
        return found
    finally:
        endpoint.stop()


def swap_attempts(client: docker.DockerClient, slot: FreshSlot) -> dict[str, str]:
    """Bind a checked folder of the work folder, swap it for a link, start: what /probe holds."""
    seen = {}
    for target in (slot.engine_run, Path("/tmp"), Path("/etc")):
        folder = slot.work / f"swap-{target.name}"
        folder.mkdir()
        (folder / "checked").write_text("the folder the filter checked")
        container = client.containers.create(
            slot.image, script(LIST_PROBE), network_mode="none",
            volumes={str(folder): {"bind": "/probe", "mode": "ro"}})
        folder.rename(folder.with_name(f"{folder.name}-moved"))
        folder.symlink_to(target)
        try:
            seen[str(target)] = output_of(container)
        finally:
            container.remove(force=True)
    return seen


def leave_behind(engine: docker.DockerClient, slot: FreshSlot) -> None:
    """On the engine itself, unlabelled: a watcher that restarts always, a volume, a network,
    an environment cache's volume."""
    engine.containers.run(
        slot.image, script(WATCHER), detach=True,
        name="job-one-watcher", restart_policy={"Name": "always"}, network_mode="none",
        volumes={str(slot.engine_run): {"bind": "/engine", "mode": "rw"},
                 str(slot.work): {"bind": "/work", "mode": "rw"}})
    engine.volumes.create("job-one-volume")
    engine.volumes.create("repro-gate-env-0123456789abcdef01234567")
    engine.networks.create("job-one-network")


def test_a_swapped_bind_source_mounts_what_the_filter_checked(job_one: JobOne) -> None:
    """Not the engine's socket, not the host's /tmp or /etc: the folder as checked."""
    assert len(job_one.swaps) == 3
    for target, listed in job_one.swaps.items():
        assert listed.strip() == "['checked']", (target, listed)


def test_reset_slot_answers_fresh_while_the_endpoint_holds_the_slot(job_one: JobOne) -> None:
    assert job_one.reset_code == 0, job_one.reset_output
    assert "slot 0: fresh" in job_one.reset_output


def test_nothing_job_one_made_survives_the_reset_whatever_its_labels(
    job_one: JobOne, fresh_slot: FreshSlot
) -> None:
    assert job_one.volumes == []
    assert job_one.networks == ["bridge", "host", "none"]
    assert job_one.images == [fresh_slot.image]  # the runner image, kept


def test_nothing_of_job_one_sees_the_next_runner(job_one: JobOne) -> None:
    """The watcher is gone: the next runner's secret is nowhere, its DOCKER_HOST answers."""
    assert job_one.next_runner_answers
    assert job_one.containers == []  # the next runner was removed; the watcher never came back
    assert "stolen" not in job_one.work_folder


def test_reset_slot_on_bad_input_is_one_line_and_exit_2(fresh_slot: FreshSlot) -> None:
    done = repro_gate("runner", "reset-slot", "--config", str(fresh_slot.host.config),
                      "--slot", "7")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--slot 7" in done.stderr


@pytest.fixture(scope="module")
def dedicated_slot(rootless_host: RootlessHost, docker_client: docker.DockerClient,
                   python_image: PinnedImage) -> Iterator[FreshSlot]:
    image = str(docker_client.images.get(python_image.tag).id)
    yield from slot_with(rootless_host, image, dedicated_repository=DEDICATED)


def test_on_a_dedicated_slot_only_that_repositorys_labelled_caches_survive(
    dedicated_slot: FreshSlot, docker_client: docker.DockerClient, python_image: PinnedImage,
) -> None:
    """Made through the filter, a cache carries the repository; one prepared past it, or
    labelled for another repository, is dropped."""
    endpoint = EndpointProcess(dedicated_slot.host, 0)
    try:
        load_image(docker_client, python_image, endpoint.client)
        own = endpoint.client.volumes.create("repro-gate-env-00000000000000000000000a")
        engine = engine_of(dedicated_slot)
        engine.volumes.create("repro-gate-env-00000000000000000000000b")
        engine.volumes.create("repro-gate-env-00000000000000000000000c", labels={
            "org.repro-gate.repository": "octo-org/other"})
        engine.close()
        done = repro_gate("runner", "reset-slot", "--config", str(dedicated_slot.host.config),
                          "--slot", "0", timeout=300)
        with contextlib.closing(engine_of(dedicated_slot)) as engine:
            left = {v.name: v.attrs["Labels"] for v in engine.volumes.list()}
    finally:
        endpoint.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(left) == [own.name]
    assert left[own.name]["org.repro-gate.repository"] == DEDICATED
