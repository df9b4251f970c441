"""Fail-fast on the gate's side: run B's trajectory followed from the host and B stopped at its
first step that differs from run A's. Real trainings under the real probe and the local
launcher; the matching rules on records written here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from repro_gate.compare.tolerance import Tolerance
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate import fail_fast, training_run
from repro_gate.gate.fail_fast import Divergence, Reference, Watch, up_to
from repro_gate.launch.base import RunSpec
from repro_gate.launch.local import LocalLauncher
from repro_gate.probe import (
    INJECT_DIR,
    PROBE_SUBDIR,
    STOP_EXIT_CODE,
    TRAJECTORY_FILE,
    probe_output_dir,
)

STEPS = 12
NUDGED_STEP = 3
# A float64 training whose input at step 3 moves by 1e-9 when NUDGE is set (an upgraded package
# that changes a number by a hair): the loss moves from step 3 on, and the parameters with it.
# Each step takes a while, as a real one does, so that a stopped run is seen to stop early.
TRAINING = f"""
import os
import time
import torch

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, {STEPS + 1}):
    x = torch.randn(8, 4)
    if step == {NUDGED_STEP} and os.environ.get("NUDGE"):
        x = x + 1e-9
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
    if step == {NUDGED_STEP} and os.environ.get("HANG"):
        time.sleep(120)  # takes no step the probe could stop at
print("finished all steps")
"""


def spec(tmp_path: Path, name: str, env: dict[str, str]) -> RunSpec:
    run_dir = tmp_path / "runs" / name
    run_dir.mkdir(parents=True)
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    return RunSpec(name, "deterministic", [sys.executable, str(script)], tmp_path, run_dir,
                   {"REPRO_GATE_MODE": "deterministic", "REPRO_GATE_SEED": "1234", **env},
                   120.0, tmp_path / "logs" / f"{name}.log", [INJECT_DIR])


def execute(tmp_path: Path, name: str, env: dict[str, str],
            reference: Reference | None = None) -> training_run.RunRecord:
    return training_run.execute(LocalLauncher(), spec(tmp_path, name, env), lambda _: None,
                                None, reference)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> training_run.RunRecord:
    """Run A, not nudged, at full speed."""
    record = execute(tmp_path_factory.mktemp("fail-fast"), "A", {})
    assert record.exit_code == 0 and len(record.trajectory) == STEPS, record.log_tail()
    return record


def test_run_b_is_stopped_at_its_first_divergent_step(run_a: training_run.RunRecord,
                                                      tmp_path: Path) -> None:
    reference = Reference.of({0: run_a.trajectory})

    record = execute(tmp_path, "B", {"NUDGE": "1", "STEP_SECONDS": "0.2"}, reference)

    assert (record.stopped, record.divergence) == ("divergence", Divergence(0, NUDGED_STEP))
    assert record.ended_cleanly
    assert [step["step"] for step in record.trajectory] == [1, 2, NUDGED_STEP]
    assert "finished all steps" not in record.log_path.read_text()  # stopped before its end
    assert record.side().stopped == "divergence"
    # The probe stopped it at its next step, writing its files as at a run's end.
    assert record.exit_code == STOP_EXIT_CODE
    assert record.probe_status is not None and record.probe_status["stopped"] == "stop_file"
    assert record.in_process_fingerprint is not None


def test_a_run_that_takes_no_further_step_is_ended_by_the_launcher(
        run_a: training_run.RunRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fail_fast, "STOP_GRACE_SECONDS", 0.5)
    reference = Reference.of({0: run_a.trajectory})

    record = execute(tmp_path, "B", {"NUDGE": "1", "HANG": "1"}, reference)

    assert (record.stopped, record.divergence) == ("divergence", Divergence(0, NUDGED_STEP))
    assert record.ended_cleanly and record.exit_code != 0
    assert "finished all steps" not in record.log_path.read_text()


# ----- the rules, on records written here ------------------------------------------------------


def record(step: int, loss: float | None, params: str = "p") -> dict[str, Any]:
    return {"step": step, "loss": None if loss is None else loss.hex(), "params": {"w": params}}


def test_bitwise_a_step_differs_by_its_parameters_or_its_loss() -> None:
    reference = Reference.of({0: [record(1, 1.0), record(2, 2.0)], 1: [record(1, 3.0)]})
    assert reference is not None

    assert not reference.differs(0, record(1, 1.0))
    assert reference.differs(0, record(1, 1.0, params="other"))
    assert reference.differs(0, record(2, 2.5))
    assert reference.differs(1, record(1, 1.0))  # each rank against its own
    assert not reference.differs(0, record(3, 9.0))  # a step run A did not record
    assert not reference.differs(2, record(1, 9.0))  # a rank run A did not have


def test_under_a_tolerance_only_the_loss_counts() -> None:
    reference = Reference.of({0: [record(1, 1.0, "aa"), record(2, None, "bb"),
                                  record(3, 2.0, "cc"), record(4, float("nan"), "dd")]},
                             Tolerance(atol=0.0, rtol=1e-3))
    assert reference is not None

    assert not reference.differs(0, record(1, 1.0009, "other"))  # within rtol * |b|
    assert reference.differs(0, record(1, 1.002))
    assert not reference.differs(0, record(2, 5.0))  # no loss in the reference
    assert not reference.differs(0, record(3, None))  # no loss in this run
    assert not reference.differs(0, record(4, float("nan")))  # NaN agrees with NaN
    assert reference.differs(0, record(4, 1.0))


def test_a_run_without_steps_is_no_reference() -> None:
    assert Reference.of({0: []}) is None


def test_a_stopped_run_keeps_its_steps_up_to_the_divergent_step() -> None:
    steps = [record(step, 1.0) for step in range(1, 6)]

    assert up_to(steps, Divergence(0, 3)) == steps[:3]


def test_a_run_that_ended_before_a_poll_is_looked_at_once_it_is_over(tmp_path: Path) -> None:
    run = spec(tmp_path, "B", {})
    probe_output_dir(run.run_dir).mkdir()
    steps = [record(1, 1.0), record(2, 9.0), record(3, 9.0)]
    (probe_output_dir(run.run_dir) / TRAJECTORY_FILE).write_text(
        "".join(json.dumps(step) + "\n" for step in steps))
    watch = Watch(run, Reference.of({0: [record(1, 1.0), record(2, 2.0)]}))

    with watch.running():
        pass  # the run ended before the first poll
    watch.finish()

    assert watch.divergence == Divergence(0, 2)


def test_lines_are_read_as_they_are_added_a_partial_one_when_complete(tmp_path: Path) -> None:
    run = spec(tmp_path, "B", {})
    probe_output_dir(run.run_dir).mkdir()
    path = probe_output_dir(run.run_dir) / TRAJECTORY_FILE
    watch = Watch(run, Reference.of({0: [record(1, 1.0), record(2, 2.0)]}))
    first, second = json.dumps(record(1, 1.0)), json.dumps(record(2, 9.0))

    path.write_text(first + "\n" + second[:10])
    assert watch.look() is None
    with path.open("a") as handle:
        handle.write(second[10:] + "\n")

    assert watch.look() == Divergence(0, 2)


def test_a_probe_folder_that_is_a_link_stops_the_run_and_is_run_tampered(tmp_path: Path) -> None:
    other = tmp_path / "runs" / "A" / PROBE_SUBDIR
    other.mkdir(parents=True)
    (other / TRAJECTORY_FILE).write_text(json.dumps(record(1, 1.0)) + "\n")
    run = spec(tmp_path, "B", {})
    os.symlink(other, run.run_dir / PROBE_SUBDIR)
    watch = Watch(run, Reference.of({0: [record(1, 2.0)]}))

    with pytest.raises(GateError) as raised:
        watch.finish()

    assert raised.value.kind == ErrorKind.RUN_TAMPERED
    assert str(run.run_dir / PROBE_SUBDIR) in raised.value.message
