"""Watching one runner container: the hook's status turns the slot BUSY and counts the job (or
the refusal), and a daemon that went away during a drain ends the run as LOST, with the job's
status kept. The daemon here is one that does not answer: its socket does not exist."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from helpers.runner_files import SLOT_UUIDS, token_file, write_config

from repro_gate.runner import hook
from repro_gate.runner.containers import Daemon
from repro_gate.runner.metrics import ServiceMetrics
from repro_gate.runner.registration import JitRunner, Registrar
from repro_gate.runner.runner_config import load_runner_config
from repro_gate.runner.runner_watch import Ending, RunnerWatch
from repro_gate.runner.slot_cycle import SlotCycle
from repro_gate.runner.slot_folders import SlotFolders
from repro_gate.runner.slots import Slot

SLOT = Slot(0, SLOT_UUIDS[0], "NVIDIA H100 80GB HBM3")
RUNNER = JitRunner(42, "repro-gate-gpuhost-slot0", ("self-hosted",), "ZW5jb2RlZA==")
CONTAINER = "0123456789abcdef" * 4


def watch(folder: Path, status: dict[str, str] | None) -> tuple[SlotCycle, list[str]]:
    """A drained slot whose runner's daemon does not answer; the hook's status if given."""
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    config = load_runner_config(write_config(folder, github, work_root=str(folder / "work")))
    folders = SlotFolders.under(config.work_root, SLOT)
    folders.status.mkdir(parents=True)
    if status is not None:
        (folders.status / hook.STATUS_FILE).write_text(json.dumps(status))
    lines: list[str] = []
    drain = threading.Event()
    drain.set()
    cycle = SlotCycle(SLOT, config, folders, f"unix://{folder}/no-daemon.sock",
                      Registrar(config), ServiceMetrics(config.pool), drain, lines.append)
    return cycle, lines


def sample(cycle: SlotCycle, name: str, **labels: str) -> float | None:
    return cycle.metrics.registry.get_sample_value(
        f"repro_gate_runner_{name}", {"pool": "default", "gpu_model": "nvidia-h100-80gb-hbm3",
                                      **labels})


@pytest.mark.parametrize(("status", "seen", "said"), [
    ({"outcome": "accepted", "uuid": SLOT.uuid},
     hook.HookStatus(hook.HookOutcome.ACCEPTED, SLOT.uuid), f"job started on {SLOT.uuid}"),
    ({"outcome": "refused", "reason": "GPU not visible"},
     hook.HookStatus(hook.HookOutcome.REFUSED, "GPU not visible"),
     "the hook refused the job: GPU not visible"),
])
def test_a_job_that_started_keeps_its_status_when_the_daemon_is_lost(
    status: dict[str, str], seen: hook.HookStatus, said: str, tmp_path: Path
) -> None:
    cycle, lines = watch(tmp_path, status)
    daemon = Daemon(cycle.engine_url)

    run = RunnerWatch(cycle, daemon, CONTAINER, RUNNER).until_end(0.0)
    daemon.close()

    assert (run.ending, run.exit_code, run.status) == (Ending.LOST, None, seen)
    assert run.seconds >= 0.0
    assert lines == [f"slot 0: {said}", f"slot 0: the Docker daemon at {cycle.engine_url}"
                                        " does not answer: waiting for it"]
    assert sample(cycle, "slots", state="busy") == 1.0
    assert sample(cycle, "jobs_started_total") == 1.0
    refused = seen.outcome is hook.HookOutcome.REFUSED
    assert sample(cycle, "health_refusals_total") == (1.0 if refused else 0.0)


def test_a_runner_lost_before_any_job_has_no_status(tmp_path: Path) -> None:
    cycle, lines = watch(tmp_path, None)
    daemon = Daemon(cycle.engine_url)

    run = RunnerWatch(cycle, daemon, CONTAINER, RUNNER).until_end(0.0)
    daemon.close()

    assert (run.ending, run.status) == (Ending.LOST, None)
    assert sample(cycle, "jobs_started_total") is None  # no job: the model was never seen
    assert lines == [f"slot 0: the Docker daemon at {cycle.engine_url} does not answer:"
                     " waiting for it"]


def test_a_status_file_that_is_not_the_hooks_counts_as_a_refusal(tmp_path: Path) -> None:
    cycle, lines = watch(tmp_path, {"outcome": "maybe"})
    daemon = Daemon(cycle.engine_url)

    run = RunnerWatch(cycle, daemon, CONTAINER, RUNNER).until_end(0.0)
    daemon.close()

    assert run.status == hook.HookStatus(hook.HookOutcome.REFUSED, hook.UNREADABLE)
    assert lines[0] == f"slot 0: the hook refused the job: {hook.UNREADABLE}"
