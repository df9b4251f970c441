"""The gate's edges: a 300 MB line, an unexpected exception, an output directory it cannot use.
Each through a real `repro-gate check` process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import check, script

from repro_gate import validation

LINE_BYTES = 300 * 1024 * 1024
# Holding the line once would take 300 MB; the gate itself (with torch preloaded) is below 250.
MAX_GATE_RSS_MB = 300


def error_manifest(output_dir: Path, code: str) -> dict:
    document = json.loads((output_dir / "manifest.json").read_text())
    assert validation.errors("manifest", document) == []
    assert document["verdict"] == "error"
    assert document["reasons"][0]["code"] == code
    return document


def test_a_300_mb_line_without_newline_keeps_the_gate_small(project: Path) -> None:
    # The peak RSS of the gate and what it reaped: the training writes from a 1 MB buffer.
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "repro_gate", "check", "--no-cost",
         *script("long_line.py")],
        cwd=project, capture_output=True, text=True, timeout=300, check=True,
    )
    exit_code, peak_kib = map(int, completed.stdout.split())
    assert exit_code == 2  # nothing to compare: the training has no trajectory
    assert peak_kib / 1024 < MAX_GATE_RSS_MB, f"peak RSS {peak_kib / 1024:.0f} MB"
    log = project / "repro-gate-out" / "logs" / "A.log"
    assert log.stat().st_size == LINE_BYTES


def test_an_unexpected_exception_is_one_line_and_an_internal_error_manifest(
    project: Path,
) -> None:
    result = check(project, *script("bad_trajectory.py"))
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    gate_log = project / "repro-gate-out" / "logs" / "gate.log"
    [line] = result.stderr.strip().splitlines()
    # The record is read (undecodable bytes replaced) and its loss fails to parse: whichever
    # exception the gate meets first, it is named in one line.
    assert re.match(r"repro-gate: internal error: \w+Error: ", line), line
    assert line.endswith(f"; details in {gate_log}")
    assert "Traceback" in gate_log.read_text()
    document = error_manifest(project / "repro-gate-out", "internal")
    assert document["reasons"][0]["message"] == line.removeprefix("repro-gate: ")


def test_an_output_directory_without_a_usable_logs_directory_is_refused_before_any_run(
    project: Path,
) -> None:
    output_dir = project / "repro-gate-out"
    output_dir.mkdir()
    (output_dir / "logs").write_text("a file where the logs directory goes")
    result = check(project, "--", sys.executable, "-c", "open('started', 'w')")
    assert result.exit_code == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert f"directory {output_dir / 'logs'} is not writable" in result.stderr
    assert not (project / "started").exists()
    assert not (output_dir / "runs" / "A").exists()


@pytest.fixture
def immutable_leftover(project: Path):  # type: ignore[no-untyped-def]
    """A file in runs/A that not even root may delete (chattr +i), removed afterwards."""
    leftover = project / "repro-gate-out" / "runs" / "A" / "stuck.pt"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"old")
    if subprocess.run(["chattr", "+i", str(leftover)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    yield leftover
    subprocess.run(["chattr", "-i", str(leftover)], check=True)


def test_an_undeletable_leftover_in_the_run_directory_is_one_line(
    project: Path, immutable_leftover: Path
) -> None:
    result = check(project, "--", sys.executable, "-c", "open('started', 'w')")
    assert result.exit_code == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert f"cannot clear the run directory {immutable_leftover.parent}" in result.stdout
    assert not (project / "started").exists()
    error_manifest(project / "repro-gate-out", "output_dir")
