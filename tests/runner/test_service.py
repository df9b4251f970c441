"""The runner service's start-up checks and what it says, without GitHub or an engine: the
environment it keeps for itself, an engine that does not answer, orphans it cannot list, a
shared daemon that is not a Unix socket, and the drain a signal starts."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers.runner_files import RUNNER_IMAGE, SLOT_UUIDS, token_file, write_config

from repro_gate.errors import ConfigError, ErrorKind, GateError
from repro_gate.runner.registration import Registrar
from repro_gate.runner.runner_config import RunnerConfig, load_runner_config
from repro_gate.runner.service import (
    LOG_PREFIX,
    Service,
    check_environment,
    delete_orphan_registrations,
    emit,
    prepare_engine,
)
from repro_gate.runner.slots import Slot

SLOTS = [Slot(index, uuid, "NVIDIA H100 80GB HBM3") for index, uuid in enumerate(SLOT_UUIDS)]


def config(folder: Path, **top: object) -> RunnerConfig:
    github = {"repository": "octo-org/trainer", "api_url": "http://127.0.0.1:9",
              "auth": {"token_file": token_file(folder).name}}
    return load_runner_config(write_config(folder, github, work_root=str(folder / "work"),
                                           **top))


@pytest.mark.parametrize("variable", ["ACTIONS_RUNNER_INPUT_JITCONFIG",
                                      "ACTIONS_RUNNER_HOOK_JOB_STARTED",
                                      "REPRO_GATE_SLOT_UUID", "REPRO_GATE_HOOK_ALLOW_NO_GPU"])
def test_runner_environment_may_not_set_what_the_service_sets(
    variable: str, tmp_path: Path
) -> None:
    effective = config(tmp_path, runner={"image": RUNNER_IMAGE,
                                         "environment": {"HTTPS_PROXY": "http://p:3128",
                                                         variable: "x"}})

    with pytest.raises(ConfigError) as refused:
        check_environment(effective, SLOTS)

    assert str(refused.value) == (f"{effective.config_file}: runner.environment.{variable}: is"
                                  " set by the service itself")


def test_other_runner_environment_passes(tmp_path: Path) -> None:
    effective = config(tmp_path, runner={"image": RUNNER_IMAGE,
                                         "environment": {"HTTPS_PROXY": "http://p:3128"}})

    check_environment(effective, SLOTS)

    assert effective.runner.environment == (("HTTPS_PROXY", "http://p:3128"),)


def test_each_log_line_is_one_prefixed_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    emit("slot 0: registered")
    emit("slot 1: stopped")

    assert capsys.readouterr().err == (f"{LOG_PREFIX}slot 0: registered\n"
                                       f"{LOG_PREFIX}slot 1: stopped\n")


def test_an_engine_that_does_not_answer_stops_start_up_as_a_docker_error(
    tmp_path: Path,
) -> None:
    url = f"unix://{tmp_path}/docker.sock"

    with pytest.raises(GateError) as refused:
        prepare_engine(config(tmp_path), url, ["org.repro-gate.runner-service=x"])

    assert refused.value.kind is ErrorKind.DOCKER
    assert str(refused.value).startswith(f"docker_url {url}: the Docker daemon cannot be reached")


def test_orphan_registrations_that_cannot_be_listed_are_said_and_start_up_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    effective = config(tmp_path)
    registrar = Registrar(effective)
    (tmp_path / "token").unlink()

    delete_orphan_registrations(effective, registrar)

    said = capsys.readouterr().err
    assert said.startswith(f"{LOG_PREFIX}orphan registrations not cleaned: cannot read token"
                           f" file {tmp_path / 'token'}: ")
    assert said.count("\n") == 1


def test_a_shared_daemon_that_does_not_answer_stops_start_up_before_anything_is_made(
    tmp_path: Path,
) -> None:
    effective = config(tmp_path, docker_url=f"unix://{tmp_path}/docker.sock",
                       isolation={"engine": "shared"})
    service = Service(effective, SLOTS)

    with pytest.raises(GateError) as refused:
        service.start_up()

    assert refused.value.kind is ErrorKind.DOCKER
    assert "the Docker daemon cannot be reached" in str(refused.value)
    assert not effective.work_root.exists()
    assert service.endpoints == {}


def test_a_signal_drains_the_service_and_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = Service(config(tmp_path, drain_timeout_seconds=90), SLOTS)

    service._on_signal(signal.SIGTERM, None)
    service._on_signal(signal.SIGINT, None)

    assert service.drain.is_set()
    assert capsys.readouterr().err == (f"{LOG_PREFIX}SIGTERM: draining (no new registrations;"
                                       " busy jobs get 90 s)\n")
