"""Step records through the real probe, in real training processes: read back one step late on an
accelerator's path, and sampled on CPU for large tensors, with the caveat the cause then carries.

No GPU here: "as an accelerator" runs the training with the probe treating CPU as one (the probe's
`HOST_DEVICE_TYPES` emptied before the training starts), so its records take the batched,
asynchronously copied path and each record is written a step late, as on a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import SCRIPTS
from helpers.trajectories import without_times

from repro_gate.compare.cause import classify
from repro_gate.compare.trajectory import compare_trajectories
from repro_gate.probe import (
    INJECT_DIR,
    STATUS_FILE,
    STOP_EXIT_CODE,
    read_json,
    read_trajectory,
)

pytest.importorskip("torch")

AS_ACCELERATOR = """
import runpy, sys
import torch  # first, as a training does: the probe then sets itself up
import _repro_gate_host_read
_repro_gate_host_read.HOST_DEVICE_TYPES = frozenset()  # the probe's records take the GPU path
runpy.run_path(sys.argv[1], run_name="__main__")
"""
# A 90,300-element weight (353 rows, sampled on CPU in 32 blocks of 12 rows) and an optimizer
# that, at step 3 of run B only, nudges one element of its row 0: step 3 samples rows 24 to 35.
LARGE_MODEL = """
import os, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(300, 301), torch.nn.Tanh(), torch.nn.Linear(301, 1))

class NudgingSGD(torch.optim.SGD):
    count = 0

    def step(self, closure=None):
        super().step(closure)
        self.count += 1
        if self.count == 3 and os.environ.get("NUDGE"):
            with torch.no_grad():
                model[0].weight.view(-1)[7] += 1e-3

optimizer = NudgingSGD(model.parameters(), lr=0.01)
for step in range(1, 7):
    x = torch.randn(16, 300)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def run(script: Path, run_dir: Path, *, accelerator: bool = False,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a training the way the gate does (probe injected, deterministic mode)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    env.update(PYTHONPATH=str(INJECT_DIR), PYTHONHASHSEED="0", REPRO_GATE_RUN_DIR=str(run_dir),
               REPRO_GATE_MODE="deterministic", REPRO_GATE_SEED="1234", **(extra_env or {}))
    command = [sys.executable, str(script)]
    if accelerator:
        wrapper = run_dir / "as_accelerator.py"
        wrapper.write_text(AS_ACCELERATOR)
        command = [sys.executable, str(wrapper), str(script)]
    return subprocess.run(command, env=env, cwd=run_dir, capture_output=True, text=True,
                          timeout=180)


def test_lagged_records_show_a_divergence_at_its_own_step(tmp_path: Path) -> None:
    first = run(SCRIPTS / "noisy_step3.py", tmp_path / "a")
    assert first.returncode == 0, first.stderr
    second = run(SCRIPTS / "noisy_step3.py", tmp_path / "b", accelerator=True)
    assert second.returncode == 0, second.stderr
    steps_a, steps_b = read_trajectory(tmp_path / "a"), read_trajectory(tmp_path / "b")
    # Step 3's record is read back at step 4, every record exact and numbered as its step.
    assert [step["step"] for step in steps_b] == [step["step"] for step in steps_a]
    assert without_times(steps_b[:2]) == without_times(steps_a[:2])
    divergence = compare_trajectories(steps_a, steps_b, ("A", "B"))["first_divergence"]
    assert divergence is not None
    assert (divergence["step"], divergence["cause"]) == (3, "input")


def test_lagged_records_equal_those_read_at_once_and_the_last_is_flushed(tmp_path: Path) -> None:
    at_once = run(SCRIPTS / "train_unseeded.py", tmp_path / "cpu")
    lagged = run(SCRIPTS / "train_unseeded.py", tmp_path / "gpu_path", accelerator=True)
    assert at_once.returncode == lagged.returncode == 0, lagged.stderr
    assert at_once.stdout == lagged.stdout  # the same training: the same last loss
    steps = without_times(read_trajectory(tmp_path / "gpu_path"))
    assert steps == without_times(read_trajectory(tmp_path / "cpu"))
    assert [step["step"] for step in steps] == [1, 2, 3, 4, 5]
    assert read_json(tmp_path / "gpu_path", STATUS_FILE)["errors"] == []
    stopped = run(SCRIPTS / "train_unseeded.py", tmp_path / "max_steps", accelerator=True,
                  extra_env={"REPRO_GATE_MAX_STEPS": "2"})
    assert stopped.returncode == STOP_EXIT_CODE
    assert without_times(read_trajectory(tmp_path / "max_steps")) == steps[:2]


def test_sampled_records_find_a_divergence_in_an_unsampled_row_with_a_caveat(
    tmp_path: Path,
) -> None:
    script = tmp_path / "large_model.py"
    script.write_text(LARGE_MODEL)
    first = run(script, tmp_path / "a")
    assert first.returncode == 0, first.stderr
    steps_a = read_trajectory(tmp_path / "a")
    assert [step.get("sampled") for step in steps_a] == [32] * 6
    second = run(script, tmp_path / "b", extra_env={"NUDGE": "1"})
    assert second.returncode == 0, second.stderr
    steps_b = read_trajectory(tmp_path / "b")
    # The nudge of step 3 is in a row that step 3 does not sample; step 4's loss shows it.
    # Whole records would say `optimizer` at step 3; sampled ones say `forward` at step 4, and
    # that it may have begun in unsampled rows of steps 1 to 3.
    assert without_times(steps_b[:3]) == without_times(steps_a[:3])
    divergence = compare_trajectories(steps_a, steps_b, ("A", "B"))["first_divergence"]
    assert divergence is not None
    assert (divergence["step"], divergence["cause"]) == (4, "forward")
    assert divergence["note"] == (
        "parameters and gradients of large tensors were sampled (1/32 of each per step), so the"
        " divergence may have begun in rows not sampled, in the backward pass or the optimizer"
        " of steps 1 to 3")


def test_causes_on_sampled_records_say_what_sampling_cannot_rule_out() -> None:
    def record(step: int, sampled: int | None, **changed: object) -> dict:
        entry = {"step": step, "loss": "0x1p+0", "inputs": "i", "params": {"w": "p"},
                 "grads": {"w": "g"}, "init": {"w": "0"}, **changed}
        return entry if sampled is None else {**entry, "sampled": sampled}

    def note(step: int, sampled: int | None, **changed: object) -> tuple[str, str | None]:
        diagnosis = classify(record(step, sampled), record(step, sampled, **changed))
        return diagnosis["cause"], diagnosis.get("note")

    caveat = ("parameters and gradients of large tensors were sampled (1/32 of each per step),"
              " so the divergence may have begun in rows not sampled, in the backward pass or"
              " the optimizer of ")
    assert note(40, 32, loss="0x1p+1") == ("forward", caveat + "steps 9 to 39")
    assert note(5, 32, grads={"w": "h"}, loss="0x1p+0") == ("backward", caveat + "steps 1 to 4")
    assert note(1, 32, params={"w": "q"}) == ("optimizer", caveat + "step 1")
    # At step 1 the parameters before the step are the initial ones, recorded whole.
    assert note(1, 32, loss="0x1p+1") == ("forward", None)
    assert note(3, 32, inputs="j") == ("input", None)
    assert note(3, None, loss="0x1p+1") == ("forward", None)  # whole records: exact


# A BatchNorm model whose running mean run B nudges after step 3's update: in training mode the
# batch's own statistics normalise, so parameters and loss stay equal at every step.
BATCHNORM_MODEL = """
import os, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
model.register_buffer("mask", torch.ones(8))  # never written: digested once, then kept
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 6):
    loss = model(torch.randn(16, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 3 and os.environ.get("NUDGE"):
        with torch.no_grad():
            model[1].running_mean[0] += 1e-3
"""


@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu", "as_accelerator"])
def test_buffers_that_differ_while_parameters_agree_are_the_cause_buffers(
    tmp_path: Path, accelerator: bool
) -> None:
    script = tmp_path / "batchnorm.py"
    script.write_text(BATCHNORM_MODEL)
    first = run(script, tmp_path / "a", accelerator=accelerator)
    second = run(script, tmp_path / "b", accelerator=accelerator, extra_env={"NUDGE": "1"})
    assert first.returncode == second.returncode == 0, second.stderr
    steps_a, steps_b = read_trajectory(tmp_path / "a"), read_trajectory(tmp_path / "b")
    # In the model's own order (named_buffers: its own, then its children's).
    assert list(steps_a[0]["buffers"]) == ["mask", "1.running_mean", "1.running_var",
                                           "1.num_batches_tracked"]
    assert len({step["buffers"]["mask"] for step in steps_a}) == 1
    assert len({step["buffers"]["1.running_mean"] for step in steps_a}) == 5
    assert [s["params"] for s in steps_a] == [s["params"] for s in steps_b]
    divergence = compare_trajectories(steps_a, steps_b, ("A", "B"))["first_divergence"]
    assert divergence is not None
    # Step 3's record is taken in its optimizer step, before the nudge: step 4 shows it.
    assert (divergence["step"], divergence["cause"], divergence["parameters"]) == (
        4, "buffers", [])
    assert divergence["buffers"] == ["1.running_mean"]
