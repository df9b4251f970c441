"""`runner audit` brings up the audited slot and a second one exactly as `serve` does, and takes
them down again whatever happens: here the engine does not answer (shared engine, no daemon at
docker_url), so the audit stops in one line before any attempt, and both slots are free again."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.runner_files import SLOT_UUIDS, token_file, write_config

from repro_gate.errors import ErrorKind, GateError
from repro_gate.runner.audit_session import audit_slot
from repro_gate.runner.runner_config import RunnerConfig, load_runner_config
from repro_gate.runner.slot_endpoint import SlotEndpoint
from repro_gate.runner.slots import Slot

SLOTS = [Slot(index, uuid, "NVIDIA H100 80GB HBM3") for index, uuid in enumerate(SLOT_UUIDS)]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the slots' folders are root's")


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[RunnerConfig]:
    """A shared-engine config whose daemon socket does not exist (short paths: sockets)."""
    folder = Path(tempfile.mkdtemp(prefix="rg-"))
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    yield load_runner_config(write_config(
        folder, github, work_root=str(folder / "work"),
        docker_url=f"unix://{folder}/no-daemon.sock", isolation={"engine": "shared"}))
    shutil.rmtree(folder, ignore_errors=True)


def test_an_engine_that_does_not_answer_stops_the_audit_and_frees_both_slots(
    shared: RunnerConfig,
) -> None:
    said: list[str] = []

    with pytest.raises(GateError) as stopped:
        audit_slot(shared, SLOTS, SLOTS[1], said.append)

    assert stopped.value.kind is ErrorKind.DOCKER
    assert str(stopped.value).startswith(f"docker_url {shared.docker_url}: the Docker daemon"
                                         " cannot be reached")
    assert said == []
    assert sorted(path.name for path in shared.work_root.iterdir()) == [
        "control", "slot0", "slot1"]
    assert list((shared.work_root / "control").iterdir()) == []  # no control socket left
    for slot in SLOTS:  # neither slot's endpoint is left holding it
        assert not SlotEndpoint(shared, slot).socket.exists()
        with SlotEndpoint(shared, slot):
            pass


def test_with_one_slot_only_the_audited_slot_is_brought_up(shared: RunnerConfig) -> None:
    with pytest.raises(GateError):
        audit_slot(shared, SLOTS[:1], SLOTS[0], print)

    assert sorted(path.name for path in shared.work_root.iterdir()) == ["control", "slot0"]
