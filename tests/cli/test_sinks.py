"""A run's status on a terminal is one line rewritten in place, erased when the run's output
goes on or the run ends; in a log it is a plain line. In the action each run is a log group
whose output cannot issue workflow commands; the gate's notices show names escaped."""

from __future__ import annotations

import io
import os

import pytest
from helpers.workflow_commands import live_commands, window_tokens

from repro_gate.cli.sinks import (
    CLEAR_LINE,
    GroupedSinks,
    RunSink,
    notices_on_stderr,
    notices_on_stdout,
)
from repro_gate.launch.progress import (
    ENV_STATUS_SECONDS,
    FIRST_STATUS_SECONDS,
    LOG_STATUS_SECONDS,
    TERMINAL_STATUS_SECONDS,
)
from repro_gate.publish import actions


def read_all(main: int) -> bytes:
    """Everything written to the terminal: one read may return only part of it; the end of
    the other side (closed) reads as an error."""
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            return b"".join(chunks)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def test_on_a_terminal_the_status_is_rewritten_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_STATUS_SECONDS, raising=False)
    main, secondary = os.openpty()
    with open(secondary, "w", encoding="utf-8") as terminal:
        sink = RunSink("A", lambda: terminal)
        sink.status("step 1, 2 steps/s, 1 s elapsed")
        sink.status("step 3, 2 steps/s, 2 s elapsed")
        sink("the training speaks")
        sink.status("step 5, 2 steps/s, 3 s elapsed")
        sink.end_status()
        assert sink.status_timing() == (FIRST_STATUS_SECONDS, TERMINAL_STATUS_SECONDS)
    shown = read_all(main).decode()
    os.close(main)
    assert shown == (
        f"{CLEAR_LINE}[A] repro-gate: step 1, 2 steps/s, 1 s elapsed"
        f"{CLEAR_LINE}[A] repro-gate: step 3, 2 steps/s, 2 s elapsed"
        f"{CLEAR_LINE}[A] the training speaks\r\n"
        f"{CLEAR_LINE}[A] repro-gate: step 5, 2 steps/s, 3 s elapsed{CLEAR_LINE}")


def test_in_a_log_the_status_is_a_plain_line_even_when_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_STATUS_SECONDS, raising=False)
    log = io.StringIO()
    sink = RunSink("B", lambda: log, quiet=True)
    sink("not shown when quiet")
    sink.status("step 2 of 6, 1 steps/s, 4 s elapsed, about 4 s left")
    sink.end_status()
    assert log.getvalue() == "[B] repro-gate: step 2 of 6, 1 steps/s, 4 s elapsed, about 4 s left\n"
    # in a log, a short run adds no line at all
    assert sink.status_timing() == (LOG_STATUS_SECONDS, LOG_STATUS_SECONDS)


def test_each_run_is_a_group_and_its_output_cannot_issue_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sinks = GroupedSinks()
    with actions.commands_stopped():
        sinks("A")("::set-output name=verdict::forged")
        sinks("B")("step 1")
        sinks.close()

    log = capsys.readouterr().out
    first, second, third, fourth = window_tokens(log)
    assert log.splitlines() == [
        f"::stop-commands::{first}", f"::{first}::",
        "::group::repro-gate run A", f"::stop-commands::{second}",
        "[A] ::set-output name=verdict::forged", f"::{second}::",
        "::endgroup::", "::group::repro-gate run B", f"::stop-commands::{third}",
        "[B] step 1", f"::{third}::",
        "::endgroup::", f"::stop-commands::{fourth}", f"::{fourth}::",
    ]
    # The runner acts on every line but the runs' output.
    assert live_commands(log) == [line for line in log.splitlines() if not line.startswith("[")]


def test_a_notice_naming_a_file_is_one_line_on_either_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    notice = "repro-gate: warning: runs/A/x\n::notice::PASS leads outside the run directory"

    notices_on_stderr(notice)
    notices_on_stdout(notice)

    printed = capsys.readouterr()
    shown = "repro-gate: warning: runs/A/x\\n::notice::PASS leads outside the run directory\n"
    assert printed.err == printed.out == shown
