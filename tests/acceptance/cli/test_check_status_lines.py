"""Never leave the user in silence: while a run lasts, the gate prints a status line (which
run, steps done, steps/s, elapsed, the time left once run A has set the length), in a CI log
as plain lines, even when the training prints nothing and the runs' output is not streamed."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import check
from helpers.paths import TRAININGS

from repro_gate.launch.progress import ENV_STATUS_SECONDS

STEPS = 16
# Prints nothing and takes about 8 s: 16 steps of half a second each.
SILENT = f"""\
import time
import torch
from tiny import TinyNet

torch.manual_seed(0)
model = TinyNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range({STEPS}):
    x = torch.randn(16, 8)
    optimizer.zero_grad()
    loss = (model(x) ** 2).mean()
    loss.backward()
    optimizer.step()
    time.sleep(0.5)
torch.save(model.state_dict(), "model.pt")
"""
STATUS = re.compile(r"^\[(?P<run>[AB])\] repro-gate: step (?P<steps>\d+)(?: of (?P<of>\d+))?,"
                    r" (?P<rate>[0-9.e+-]+) steps/s, (?P<elapsed>\d+) s elapsed"
                    r"(?:, about (?P<left>\d+) s left)?$")


def test_a_silent_training_gets_status_lines_with_steps_and_rate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own gate: a training that prints nothing for seconds.
    shutil.copy(TRAININGS / "tiny.py", tmp_path / "tiny.py")
    (tmp_path / "train.py").write_text(SILENT)
    monkeypatch.setenv(ENV_STATUS_SECONDS, "1")

    result = check(tmp_path, "--no-cost", "--", sys.executable, "train.py")

    assert result.exit_code == 0, result.stdout + result.stderr
    statuses = [match for line in result.stderr.splitlines() if (match := STATUS.match(line))]
    assert {match["run"] for match in statuses} == {"A", "B"}, result.stderr
    steps = [int(match["steps"]) for match in statuses if match["run"] == "A"]
    assert steps == sorted(steps) and steps[-1] >= STEPS // 2, result.stderr
    assert all(float(match["rate"]) > 0 for match in statuses)
    # run A has set the length: run B's lines say how many steps and how long is left
    later = [match for match in statuses if match["run"] == "B"]
    assert all(match["of"] == str(STEPS) for match in later), result.stderr
    assert any(match["left"] is not None for match in later), result.stderr
    # plain lines for a log: no carriage returns or terminal escapes
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
