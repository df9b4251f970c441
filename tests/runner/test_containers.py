"""The service's side of the Docker daemon without a daemon: runner names and labels, and each
failure of a daemon that is not there turned into one line of the right kind."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.runner.containers import (
    SERVICE_LABEL,
    SLOT_INDEX_LABEL,
    Daemon,
    DaemonGone,
    DockerFailure,
    connect,
    runner_container_name,
    runner_labels,
    service_label,
)
from repro_gate.runner.proxy.ownership import SLOT_LABEL

GPU = "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b"


def test_each_runner_container_gets_a_new_name_no_job_can_guess() -> None:
    names = {runner_container_name("repro-gate-gpuhost-slot0") for _ in range(20)}

    assert len(names) == 20
    assert all(re.fullmatch(r"repro-gate-gpuhost-slot0-[0-9a-f]{12}", name) for name in names)


def test_a_runner_carries_the_slot_label_the_proxy_trusts_and_the_services() -> None:
    service = service_label("repro-gate", "gpuhost")

    assert service == "repro-gate-gpuhost"
    assert runner_labels(service, GPU, 1) == (
        (SLOT_LABEL, GPU), (SERVICE_LABEL, "repro-gate-gpuhost"), (SLOT_INDEX_LABEL, "1"))


def test_a_url_the_docker_client_cannot_use_is_a_docker_failure() -> None:
    with pytest.raises(DockerFailure, match="Docker at bogus://daemon: Invalid bind address"):
        Daemon("bogus://daemon")


def test_a_daemon_that_does_not_answer_is_daemon_gone_naming_its_url(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/docker.sock"
    daemon = Daemon(url)  # the API version is fixed: no answer is needed to make a client
    try:
        with pytest.raises(DaemonGone) as ping:
            daemon.ping()
        with pytest.raises(DaemonGone) as inspect:
            daemon.state("0123456789abcdef" * 4)
    finally:
        daemon.close()

    assert str(ping.value).startswith(f"ping: the Docker daemon at {url} does not answer (")
    assert str(inspect.value).startswith("inspect 0123456789ab: the Docker daemon at")


def test_waiting_for_a_daemon_ends_when_the_service_drains(tmp_path: Path) -> None:
    daemon = Daemon(f"unix://{tmp_path}/docker.sock")
    stop = threading.Event()
    notes: list[str] = []
    threading.Timer(0.3, stop.set).start()

    back = daemon.wait_until_back(stop, notes.append)
    daemon.close()

    assert back is False
    assert notes == [f"the Docker daemon at unix://{tmp_path}/docker.sock does not answer:"
                     " waiting for it"]


def test_connect_is_a_docker_error_of_exit_two_when_nothing_answers(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/docker.sock"

    with pytest.raises(GateError) as refused:
        connect(url)

    assert refused.value.kind is ErrorKind.DOCKER
    assert str(refused.value).startswith(f"docker_url {url}: the Docker daemon cannot be"
                                         " reached: ping: ")
