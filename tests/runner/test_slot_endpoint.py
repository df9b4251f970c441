"""What a job on one slot gets, without an engine: the shared daemon's socket checked, the names
kept for the runner, a slot's filter in a thread of its own, and one endpoint per slot."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.runner_files import SLOT_UUIDS, token_file, write_config

from repro_gate.errors import ConfigError, ErrorKind, GateError
from repro_gate.runner.proxy.policy import SlotPolicy
from repro_gate.runner.runner_config import RunnerConfig, load_runner_config
from repro_gate.runner.slot_endpoint import FilterThread, SlotEndpoint, reserved_names, unix_socket
from repro_gate.runner.slots import Slot

SLOT = Slot(0, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3")


@pytest.fixture
def short() -> Iterator[Path]:
    """A folder with a short path: Unix socket paths hold at most 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="rg-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def shared_config(folder: Path) -> RunnerConfig:
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    return load_runner_config(write_config(
        folder, github, name_prefix="lab", work_root=str(folder / "work"),
        docker_url=f"unix://{folder}/no-daemon.sock", isolation={"engine": "shared"}))


def test_the_shared_daemon_must_be_a_unix_socket() -> None:
    with pytest.raises(ConfigError) as refused:
        unix_socket("tcp://10.0.0.1:2375")

    assert unix_socket("unix:///var/run/docker.sock") == Path("/var/run/docker.sock")
    assert str(refused.value).startswith(
        "docker_url tcp://10.0.0.1:2375: the runner service needs the daemon's Unix socket")


def test_the_runners_name_stem_is_kept_from_jobs(short: Path) -> None:
    assert reserved_names(shared_config(short)) == ("lab-gpuhost-slot",)


def test_a_filter_thread_listens_until_stopped(short: Path) -> None:
    listen = short / "filter.sock"
    listen.write_text("a stale socket of a killed service")
    policy = SlotPolicy(gpu_uuid=SLOT.uuid, work_folder=short)
    running = FilterThread(policy, listen, short / "no-daemon.sock", 0)

    running.start()
    listening = listen.is_socket()
    running.stop()

    assert listening
    assert not listen.exists() and not running.thread.is_alive()


def test_a_filter_that_cannot_listen_is_a_docker_error_with_its_cause(short: Path) -> None:
    policy = SlotPolicy(gpu_uuid=SLOT.uuid, work_folder=short)
    failing = FilterThread(policy, short / "no-folder" / "filter.sock", short / "d.sock", 0)

    with pytest.raises(GateError) as failed:
        failing.start()

    assert failed.value.kind is ErrorKind.DOCKER
    assert str(failed.value).startswith("the slot's Docker filter did not start: ")
    assert "No such file or directory" in str(failed.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="the slot's folders are root's")
def test_one_endpoint_per_slot_and_the_filters_socket_in_the_slots_folder(short: Path) -> None:
    config = shared_config(short)

    with SlotEndpoint(config, SLOT) as endpoint:
        with pytest.raises(GateError) as second:
            SlotEndpoint(config, SLOT).start()
        socket_mode = stat.S_IMODE(endpoint.socket.stat().st_mode)
        engine_url = endpoint.engine_url
    with SlotEndpoint(config, SLOT):  # the first one's lock went with it
        pass

    assert endpoint.socket == short / "work" / "slot0" / "proxy" / "docker.sock"
    assert socket_mode == 0o666 and not endpoint.socket.exists()
    assert engine_url == config.docker_url
    assert second.value.kind is ErrorKind.LOCKED
    assert str(second.value) == ("slot 0 is in use by another repro-gate runner process (serve,"
                                 " slot-endpoint or audit): stop it first")
