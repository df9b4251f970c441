"""A run's status on a terminal is one line rewritten in place, erased when the run's output
goes on or the run ends; in a log it is a plain line."""

from __future__ import annotations

import io
import os

import pytest

from repro_gate.cli.sinks import CLEAR_LINE, RunSink, notices_on_stderr
from repro_gate.launch.progress import (
    ENV_STATUS_SECONDS,
    FIRST_STATUS_SECONDS,
    LOG_STATUS_SECONDS,
    TERMINAL_STATUS_SECONDS,
)


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


def test_a_notice_naming_a_file_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    notice = "repro-gate: warning: runs/A/x\n::notice::PASS leads outside the run directory"

    notices_on_stderr(notice)

    printed = capsys.readouterr()
    shown = "repro-gate: warning: runs/A/x\\n::notice::PASS leads outside the run directory\n"
    assert printed.err == shown
