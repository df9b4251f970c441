"""A cancelled gate (SIGINT, SIGTERM, SIGHUP, as a CI cancel sends them) and a timed-out run:
a real `repro-gate check` process, a real training with a grandchild in its own session."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_processes
from helpers.run_processes import MARK

from repro_gate import validation

CANCEL_SECONDS = 5.0  # from the signal to the gate's exit
START_SECONDS = 180.0  # importing torch on a busy CI machine


def start_gate(project: Path, *args: str, hang_in: str) -> subprocess.Popen[str]:
    """`repro-gate check` on the detached training, as a user starts it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env["HANG_IN"] = hang_in
    env[MARK] = str(project)  # every process of the run inherits it
    return subprocess.Popen(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--no-cost", *args,
         "--", sys.executable, "detached.py"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for_line(gate: subprocess.Popen[str], log: Path, text: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not (log.is_file() and text in log.read_text(errors="replace")):
        assert gate.poll() is None, f"the gate ended before {log.name} showed {text!r}"
        assert time.monotonic() < deadline, f"{log.name} never showed {text!r}"
        time.sleep(0.1)


def read_manifest(output_dir: Path) -> dict:
    """The manifest the gate wrote, checked against its schema."""
    document = json.loads((output_dir / "manifest.json").read_text())
    assert validation.errors("manifest", document) == []
    return document


def survivors(project: Path, output_dir: Path) -> list[int]:
    """Processes of every run (training and grandchild) still running."""
    assert list((output_dir / "runs").glob("*/*.pid")), "the training recorded no PID"
    return run_processes.survivors(str(project))


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("run", ["A", "B"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_cancels_the_gate_and_every_process_of_the_run(
    project: Path, sig: signal.Signals, run: str
) -> None:
    # A gate per signal and run: a gate is cancelled only once.
    output_dir = project / "repro-gate-out"
    # An older passing manifest must not survive the cancel.
    output_dir.mkdir()
    (output_dir / "manifest.json").write_text('{"verdict": "pass"}')
    gate = start_gate(project, hang_in=run)
    try:
        wait_for_line(gate, output_dir / "logs" / f"{run}.log", "training started")
        signalled = time.monotonic()
        gate.send_signal(sig)
        stdout, stderr = gate.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        gate.kill()
    assert gate.returncode == 2, stdout + stderr
    assert took < CANCEL_SECONDS, f"the gate took {took:.1f} s to stop"
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
    assert survivors(project, output_dir) == []
    document = read_manifest(output_dir)
    assert document["verdict"] == "error"
    [reason] = document["reasons"]
    assert reason["code"] == "cancelled"
    assert reason["message"] == f"cancelled by {sig.name} during run {run} (step 3)"
    assert "training started" in (output_dir / "logs" / f"{run}.log").read_text()


def test_a_second_signal_during_clean_up_still_gives_the_manifest(project: Path) -> None:
    output_dir = project / "repro-gate-out"
    gate = start_gate(project, hang_in="A")
    try:
        wait_for_line(gate, output_dir / "logs" / "A.log", "training started")
        gate.send_signal(signal.SIGINT)
        time.sleep(0.05)
        gate.send_signal(signal.SIGTERM)
        stdout, stderr = gate.communicate(timeout=30)
    finally:
        gate.kill()
    assert gate.returncode == 2, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert survivors(project, output_dir) == []
    reason = read_manifest(output_dir)["reasons"][0]
    assert reason["message"].startswith("cancelled by SIGINT during run A")


def test_a_timeout_kills_a_grandchild_that_left_the_session(project: Path) -> None:
    output_dir = project / "repro-gate-out"
    gate = start_gate(project, "--timeout", "3", hang_in="A")
    stdout, stderr = gate.communicate(timeout=60)
    assert gate.returncode == 2, stdout + stderr
    match = re.search(r"run A \(deterministic\) timed out after ([\d.]+) s \(timeout: 3 s\)",
                      stdout)
    assert match, stdout
    assert 3.0 <= float(match.group(1)) < 5.0  # the real wall time, not a pump's wait
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert survivors(project, output_dir) == []
    assert read_manifest(output_dir)["reasons"][0]["code"] == "timeout"
    # The grandchild's output up to the kill is in the log; nothing came after the gate ended.
    assert "grandchild tick" in (output_dir / "logs" / "A.log").read_text()
