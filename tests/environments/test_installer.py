"""Running the package tools, and their failures as one line: progress skipped, prefixes gone,
index credentials masked, an unreachable index told apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repro_gate.environments import installer
from repro_gate.errors import ErrorKind


def done(stderr: str, stdout: str = "", code: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["uv"], code, stdout, stderr)


RESOLUTION = done("""\
Using CPython 3.11.7
Resolved 12 packages in 40ms
  \N{MULTIPLICATION SIGN} No solution found when resolving dependencies:
  ╰─▶ Because only numpy<2 is available and you require numpy==2.9, we can conclude that
      your requirements are unsatisfiable.
      help: check https://bot:t0ken@pypi.example/simple
""")
REFUSED = done("""\
error: Request failed after 3 retries
  Caused by: Failed to fetch: `http://user:pw@127.0.0.1:9/simple/numpy/`
  Caused by: tcp connect error: Connection refused (os error 111)
""")


def test_the_failure_line_is_the_last_meaningful_line_without_its_prefix() -> None:
    assert installer.failure_line(REFUSED) == (
        "tcp connect error: Connection refused (os error 111)")
    assert installer.failure_line(done("ERROR: No matching distribution found for x==9")) == (
        "No matching distribution found for x==9")
    assert installer.failure_line(done("Resolved 3 packages\n\n", code=2)) == "exit code 2"


def test_the_explanation_keeps_the_tools_lines_with_credentials_masked() -> None:
    explanation = installer.explanation(RESOLUTION)

    assert explanation.splitlines()[0] == (
        "  \N{MULTIPLICATION SIGN} No solution found when resolving dependencies:")
    assert "Using CPython" not in explanation and "Resolved 12" not in explanation
    assert "t0ken" not in installer.explanation(done("see https://bot:t0ken@pypi.example/x"))
    long = done("\n".join(f"line {n}" for n in range(100)))
    assert installer.explanation(long).splitlines() == [f"line {n}" for n in range(60, 100)]


def test_an_index_that_cannot_be_reached_is_its_own_kind() -> None:
    assert installer.failure_kind(REFUSED, ErrorKind.ENVIRONMENT) == ErrorKind.INDEX_UNREACHABLE
    assert installer.failure_kind(RESOLUTION, ErrorKind.LOCK_UNRESOLVABLE) == (
        ErrorKind.LOCK_UNRESOLVABLE)
    assert installer.unreachable_line(REFUSED) == (
        "http://user:***@127.0.0.1:9/simple/numpy/`: tcp connect error: Connection refused"
        " (os error 111)")


def test_a_tool_error_says_what_failed_and_keeps_the_explanation() -> None:
    unresolved = installer.tool_error(RESOLUTION, "cannot lock the candidate",
                                      ErrorKind.LOCK_UNRESOLVABLE)
    unreachable = installer.tool_error(REFUSED, "cannot install the pins",
                                       ErrorKind.ENVIRONMENT)

    assert unresolved.kind == ErrorKind.LOCK_UNRESOLVABLE
    assert unresolved.message == (  # uv's `help:` hint is no reason
        "cannot lock the candidate: your requirements are unsatisfiable.")
    assert "No solution found" in unresolved.detail
    assert unreachable.kind == ErrorKind.INDEX_UNREACHABLE
    assert unreachable.message.startswith(
        "cannot install the pins: the package index cannot be reached: http://user:***@")


def test_a_tool_runs_without_the_gates_credentials_and_with_plain_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_installer_secret")
    monkeypatch.setenv("UV_INDEX_PRIVATE_PASSWORD", "users-own")
    code = ("import os; print(os.environ.get('GITHUB_TOKEN'), os.environ['NO_COLOR'],"
            " os.environ['UV_INDEX_PRIVATE_PASSWORD'], os.getcwd())")

    completed = installer.run_tool([sys.executable, "-c", code], tmp_path)

    assert completed.returncode == 0
    assert completed.stdout.split() == ["None", "1", "users-own", str(tmp_path)]


def test_uv_is_found() -> None:
    found = installer.uv_binary()

    assert found is not None and found.is_file()
