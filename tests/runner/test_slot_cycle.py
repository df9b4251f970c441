"""One slot's job cycle without GitHub or an engine: the runner container it would create, how
a run's end is counted (jobs by outcome, crashes in a row), a registration step that fails and
waits, a GPU that cannot be checked, and a drain that stops the cycle."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.runner_files import RUNNER_IMAGE, SLOT_UUIDS, token_file, write_config

from repro_gate.runner import hook
from repro_gate.runner.health import read_health
from repro_gate.runner.metrics import ServiceMetrics
from repro_gate.runner.proxy.ownership import SLOT_LABEL
from repro_gate.runner.registration import JitRunner, Registrar
from repro_gate.runner.runner_config import load_runner_config
from repro_gate.runner.runner_watch import Ending, RunnerRun
from repro_gate.runner.slot_cycle import (
    CONTAINER_SOCKET,
    JIT_VARIABLE,
    SlotCycle,
    keeps_caches,
)
from repro_gate.runner.slot_folders import SlotFolders
from repro_gate.runner.slot_reset import ResetReport
from repro_gate.runner.slots import Slot

SLOT = Slot(1, SLOT_UUIDS[1], "NVIDIA H100 80GB HBM3")
MODEL = "nvidia-h100-80gb-hbm3"
RUNNER = JitRunner(42, "repro-gate-gpuhost-slot1", ("self-hosted", "gpu"), "ZW5jb2RlZA==")
ACCEPTED = hook.HookStatus(hook.HookOutcome.ACCEPTED, SLOT.uuid)
REFUSED = hook.HookStatus(hook.HookOutcome.REFUSED, "GPU not visible")
NVML_ANSWERS = "absent" not in read_health(SLOT)


@dataclass
class Cycle:
    cycle: SlotCycle
    metrics: ServiceMetrics
    lines: list[str]

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            f"repro_gate_runner_{name}", {"pool": "default", "gpu_model": MODEL, **labels})


def make_cycle(folder: Path, **top: object) -> Cycle:
    github = {"repository": "octo-org/trainer", "api_url": "http://127.0.0.1:9",
              "auth": {"token_file": token_file(folder).name}}
    config = load_runner_config(write_config(folder, github, work_root=str(folder / "work"),
                                             **top))
    metrics = ServiceMetrics(config.pool)
    lines: list[str] = []
    folders = SlotFolders.under(config.work_root, SLOT)
    cycle = SlotCycle(SLOT, config, folders, f"unix://{folder}/no-daemon.sock",
                      Registrar(config), metrics, threading.Event(), lines.append)
    return Cycle(cycle, metrics, lines)


@pytest.fixture
def slot(tmp_path: Path) -> Iterator[Cycle]:
    made = make_cycle(tmp_path)
    yield made
    made.cycle.drain.set()


def test_the_runner_container_gets_the_jit_config_the_slots_folders_and_labels(
    slot: Cycle,
) -> None:
    cycle = slot.cycle
    spec = cycle._spec(RUNNER)
    environment = dict(spec.environment)

    assert spec.image == RUNNER_IMAGE and spec.gpu_uuid == SLOT.uuid
    assert environment[JIT_VARIABLE] == "ZW5jb2RlZA=="
    assert environment[hook.SLOT_VARIABLE] == SLOT.uuid
    assert {(bind.target, bind.read_only) for bind in spec.binds} == {
        (hook.CONTAINER_HOOK_DIR, True), (str(cycle.folders.work), False),
        (hook.CONTAINER_STATUS_DIR, False), (CONTAINER_SOCKET, False)}
    assert next(b.source for b in spec.binds if b.target == CONTAINER_SOCKET) == (
        cycle.folders.proxy_socket)
    assert dict(spec.labels)[SLOT_LABEL] == SLOT.uuid
    assert spec.groups == ("0",)  # the slot's own engine: its GPU's group


def test_on_the_shared_engine_the_runner_gets_no_extra_group(tmp_path: Path) -> None:
    shared = make_cycle(tmp_path, isolation={"engine": "shared"})

    assert shared.cycle._spec(RUNNER).groups == ()


def test_jobs_are_counted_by_how_their_runner_ended(slot: Cycle) -> None:
    runs = [RunnerRun(Ending.EXITED, 0, ACCEPTED, 12.0),
            RunnerRun(Ending.EXITED, 1, ACCEPTED, 5.0),
            RunnerRun(Ending.LOST, None, ACCEPTED, 7.0),
            RunnerRun(Ending.DRAINED, 143, ACCEPTED, 9.0),
            RunnerRun(Ending.EXITED, 0, REFUSED, 1.0),
            RunnerRun(Ending.EXITED, 0, None, 30.0)]

    for run in runs:
        slot.cycle._finished(run)

    counts = {outcome: slot.sample("jobs_finished_total", outcome=outcome)
              for outcome in ("completed", "crashed", "cancelled", "refused")}
    assert counts == {"completed": 1.0, "crashed": 2.0, "cancelled": 1.0, "refused": 1.0}
    assert slot.lines[0] == "slot 1: job completed after 12.0 s (runner exit code 0)"
    assert slot.lines[-1] == "slot 1: runner ended without a job (exited, exit code 0)"


def test_a_crash_loop_is_runs_without_a_job_that_exit_non_zero_in_a_row(slot: Cycle) -> None:
    crash = RunnerRun(Ending.EXITED, 1, None, 2.0)
    not_the_runners_fault = [RunnerRun(Ending.LOST, None, None, 0.0),
                             RunnerRun(Ending.DRAINED, 137, None, 0.0),
                             RunnerRun(Ending.EXITED, 0, None, 0.0)]

    looped = [slot.cycle._crash_loop(crash) for _ in range(2)]
    ignored = [slot.cycle._crash_loop(run) for run in not_the_runners_fault]
    reset = slot.cycle._crash_loop(RunnerRun(Ending.EXITED, 1, ACCEPTED, 2.0))
    again = [slot.cycle._crash_loop(crash) for _ in range(3)]

    assert looped == [False, False] and ignored == [False] * 3 and reset is False
    assert again == [False, False, True]  # crash_loop_limit 3, counted afresh after a job
    assert slot.sample("runner_crashes_total") == 5.0


def test_the_slot_stays_unhealthy_until_its_reset_leaves_nothing(tmp_path: Path) -> None:
    """No runner registers on an engine that is not fresh: the reset is tried again."""
    made = make_cycle(tmp_path, health={"recheck_seconds": 0.01})
    reports = [ResetReport(("container 0123456789ab",), 2.0), ResetReport((), 2.5)]
    asked: list[bool] = []

    def reset(keep_caches: bool) -> ResetReport:
        asked.append(keep_caches)
        return reports.pop(0)

    assert made.cycle._reset(reset, keep_caches=True) is True
    assert asked == [True, True]
    assert made.lines == [
        "slot 1: unhealthy: survived the reset: container 0123456789ab; reset again in 0.01 s",
        "slot 1: reset: the engine is fresh (2.5 s)"]


def test_a_refused_job_drops_the_dedicated_repositorys_caches_at_the_reset() -> None:
    assert keeps_caches(RunnerRun(Ending.EXITED, 0, ACCEPTED, 1.0))
    assert not keeps_caches(RunnerRun(Ending.EXITED, 1, REFUSED, 1.0))
    assert keeps_caches(RunnerRun(Ending.EXITED, 1, None, 1.0))  # a crash before any job


def test_a_drained_cycle_stops_at_once(slot: Cycle) -> None:
    slot.cycle.drain.set()

    slot.cycle.run()

    assert slot.lines == ["slot 1: stopped"]
    assert slot.sample("slots", state="stopped") == 1.0


@pytest.mark.skipif(NVML_ANSWERS, reason="NVML answers here: the slot's GPU is checked for real")
def test_a_registration_step_that_fails_is_counted_and_waits_for_its_next_try(
    tmp_path: Path,
) -> None:
    made = make_cycle(tmp_path, health={"allow_no_gpu": True})
    (tmp_path / "token").unlink()
    threading.Timer(0.3, made.cycle.drain.set).start()

    made.cycle.run()

    assert made.lines[0].startswith("slot 1: registration failed (config): cannot read token"
                                    " file ")
    assert made.lines[0].endswith("; next try in 2 s")
    assert made.lines[-1] == "slot 1: stopped"
    assert made.sample("registration_failure_kinds_total", kind="config") == 1.0


def test_a_gpu_that_cannot_be_checked_makes_the_slot_unhealthy_until_the_drain(
    slot: Cycle,
) -> None:
    threading.Timer(0.3, slot.cycle.drain.set).start()

    slot.cycle.run()

    assert slot.lines[0].startswith("slot 1: unhealthy: ")
    assert slot.lines[0].endswith("; checked again in 60 s")
    assert slot.lines[-1] == "slot 1: stopped"
    assert slot.sample("slots", state="stopped") == 1.0
