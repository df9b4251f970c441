"""`runner audit`'s escape attempts on real engines: an unfiltered root daemon, where they must
get out (so the audit can fail), and the per-slot proxy in front of one, where refusals must be
told apart from escapes. Both on a private dockerd whose no-op NVIDIA hook records GPUs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from helpers.docker_fixtures import PinnedImage
from helpers.gpu_dockerd import GpuDockerd
from helpers.proxy_thread import RunningProxy

from repro_gate.errors import GateError
from repro_gate.runner.audit import (
    AuditReport,
    AuditRow,
    AuditTarget,
    Outcome,
    run_audit,
)
from repro_gate.runner.audit.table import ATTEMPTS
from repro_gate.runner.proxy.policy import SlotPolicy

pytestmark = pytest.mark.docker
SLOT_GPU = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_GPU = "GPU-99999999-8888-7777-6666-555555555555"
PREFIX = "repro-gate-audit-"
# The daemon the `docker_client` fixture uses (docker.from_env): DOCKER_HOST or the default.
DAEMON_SOCKET = Path(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
                     .removeprefix("unix://"))

# What an engine with no filter and no kernel boundary gives away: every class of escape
# the threat model lists.
# (Privileged is left out: the confinement of the machines the tests run on refuses it.)
ESCAPES_UNFILTERED = [
    "bare-LF second request in a header",
    "Expect: 100-continue, then HEAD, then raw",
    "local volume type=tmpfs o=bind device=canary",
    "local volume type=tmpfs o=rbind device=/",
    "local volume type=none o=bind device=canary",
    "repeated DriverOpts keys in raw JSON",
    "volume driver options in a create body",
    "bind a work folder dir, swap it for a symlink",
    "bind a work folder dir, swap it for a symlink to /tmp",
    "bind a work folder dir, swap it for a symlink to /etc",
    "bind-backed volume, swap its dir for a symlink to /",
    "inspect the other slot's container",
    "HostConfig.Links to the other slot's container",
    "NetworkMode container:<other>",
    "/build?networkmode=container:<other>",
    "ID-prefix name and rename race",
    "VolumesFrom the other slot's container",
    "bind the other slot's work folder",
    "/build?cgroupparent=<outside the slot>",
    "list all containers",
    "/system/df",
    "network inspect",
    "images/create fromSrc=<loopback URL>",
    "/build?remote=<loopback URL>",
    "bind /",
    "Mounts type=bind Source=/",
    "bind the host's /tmp",
    "bind the canary folder",
    "DeviceRequests for the other GPU's UUID",
    'DeviceRequests DeviceIDs ["all"]',
    "DeviceRequests Count -1",
]
# What the per-slot proxy refuses whatever its version: it must be reported as the filter's.
REFUSED_BY_PROXY = [
    "bind /",
    "Mounts type=bind Source=/",
    "bind the host's /tmp",
    "bind the canary folder",
    "Privileged",
    "DeviceRequests for the other GPU's UUID",
    'DeviceRequests DeviceIDs ["all"]',
    "DeviceRequests Count -1",
    "inspect the other slot's container",
]


@pytest.fixture(scope="module")
def engine_image(gpu_dockerd: GpuDockerd, python_image: PinnedImage) -> str:
    """An image with /bin/sh in the private daemon (the runner image's stand-in), pulled once:
    the audits remove only what they made."""
    gpu_dockerd.pull(python_image.reference)
    return python_image.reference


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """The two slots' work folders and the canary root, as on a host."""
    made = {name: tmp_path / name for name in ("work0", "work1", "canaries")}
    for folder in made.values():
        folder.mkdir()
    yield made


def target_on(endpoint: Path, other: Path | None, image: str,
              folders: dict[str, Path]) -> AuditTarget:
    return AuditTarget(endpoint=endpoint, work_folder=folders["work0"], gpu_uuid=SLOT_GPU,
                       other_gpu_uuid=OTHER_GPU, other_endpoint=other,
                       other_work_folder=folders["work1"] if other else None, image=image)


def outcomes(report: AuditReport) -> dict[str, Outcome]:
    return {row.attempt: row.outcome for row in report.rows}


def assert_cleaned(client: docker.DockerClient, folders: dict[str, Path]) -> None:
    """Nothing the audit made is left: containers, volumes, images, canaries, scratch."""
    assert client.containers.list(all=True, filters={"name": PREFIX}) == []
    assert [v.name for v in client.volumes.list() if v.name.startswith(PREFIX)] == []
    assert client.images.list(name=f"{PREFIX}*") == []
    assert [p for p in Path("/tmp").iterdir() if p.name.startswith(PREFIX)] == []
    for folder in folders.values():
        assert list(folder.iterdir()) == []


def test_an_unfiltered_root_engine_lets_every_class_escape(
    gpu_dockerd: GpuDockerd, engine_image: str, folders: dict[str, Path]
) -> None:
    """The audit run straight on a root dockerd's socket (both slots on it, as before the
    boundary) reads the host's root-only canary, the other slot's files and environment, and
    gets the other GPU: the audit can fail."""
    target = target_on(gpu_dockerd.socket, gpu_dockerd.socket, engine_image, folders)

    report = run_audit(target, folders["canaries"])

    found = outcomes(report)
    assert {name: found[name] for name in ESCAPES_UNFILTERED} == dict.fromkeys(
        ESCAPES_UNFILTERED, Outcome.ESCAPED), report.render()
    assert report.escaped
    assert OTHER_GPU in gpu_dockerd.visible_devices().values()
    assert "ESCAPED" in report.render()
    assert_cleaned(gpu_dockerd.client, folders)


def test_through_the_proxy_refusals_are_told_from_escapes(
    gpu_dockerd: GpuDockerd, engine_image: str, folders: dict[str, Path]
) -> None:
    """The audit through a slot's proxy in front of the daemon: one row per attempt, and what
    the proxy refuses is reported as the filter's refusal, not as an escape or the engine's."""
    policy = SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=folders["work0"])
    proxy = RunningProxy(policy, gpu_dockerd.socket)
    try:
        report = run_audit(target_on(proxy.socket, gpu_dockerd.socket, engine_image, folders),
                           folders["canaries"])
    finally:
        proxy.stop()

    assert [(row.klass, row.attempt) for row in report.rows] == [
        (attempt.klass, attempt.name) for attempt in ATTEMPTS]
    found = outcomes(report)
    assert {name: found[name] for name in REFUSED_BY_PROXY} == dict.fromkeys(
        REFUSED_BY_PROXY, Outcome.REFUSED_BY_FILTER), report.render()
    assert all(row.detail for row in report.rows)
    assert_cleaned(gpu_dockerd.client, folders)


def test_with_one_slot_on_an_engine_without_gpus(
    docker_client: docker.DockerClient, python_image: PinnedImage, folders: dict[str, Path]
) -> None:
    """One slot, on the shared daemon, which has no NVIDIA driver: the other-slot attempts are
    not run, and a GPU request is the engine's refusal, told apart from the filter's."""
    target = target_on(DAEMON_SOCKET, None, python_image.tag, folders)

    report = run_audit(target, folders["canaries"])

    found = outcomes(report)
    assert {row.attempt for row in report.rows if row.outcome is Outcome.NOT_RUN} >= {
        a.name for a in ATTEMPTS if a.needs_other_slot}
    assert found["DeviceRequests Count -1"] is Outcome.STOPPED_BY_ENGINE, report.render()
    assert 'could not select device driver "nvidia"' in report.render()
    assert found["bind /"] is Outcome.ESCAPED
    assert_cleaned(docker_client, folders)


def test_an_endpoint_that_does_not_answer_is_one_error(folders: dict[str, Path]) -> None:
    target = target_on(folders["work0"] / "absent.sock", None, "image", folders)

    with pytest.raises(GateError, match=r"^runner audit: the slot endpoint .* does not answer"):
        run_audit(target, folders["canaries"])
    assert os.listdir(folders["work0"]) == []


def test_the_table_has_a_row_per_attempt_and_a_verdict() -> None:
    rows = (AuditRow("host", "bind /", Outcome.REFUSED_BY_FILTER, "create: 403 refused"),
            AuditRow("gpu", "Count -1", Outcome.ESCAPED, "started with all"))

    text = AuditReport(rows).render()

    lines = text.splitlines()
    assert lines[0].split() == ["class", "attempt", "outcome", "detail"]
    assert lines[1].startswith("host   bind /    refused by filter  create: 403 refused")
    assert lines[2].startswith("gpu    Count -1  ESCAPED")
    assert lines[-1] == "2 attempts: 1 attempt(s) ESCAPED"
    assert AuditReport(rows).escaped and not AuditReport(rows[:1]).escaped
