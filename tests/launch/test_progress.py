"""Status lines while a run lasts or an environment builds: steps counted from the trajectory,
rates, the time left, and when statuses are shown."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path

import pytest

from repro_gate import notices
from repro_gate.launch import progress
from repro_gate.launch.base import RunSpec
from repro_gate.probe import ENV_MAX_STEPS, TRAJECTORY_FILE, probe_output_dir


class Statuses:
    """A sink that shows statuses: it keeps them."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.ended = threading.Event()
        self.changed = threading.Event()

    def __call__(self, line: str) -> None:
        pass

    def status(self, text: str) -> None:
        self.shown.append(text)
        self.changed.set()

    def status_timing(self) -> tuple[float, float]:
        return 0.01, 0.01

    def end_status(self) -> None:
        self.ended.set()

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + 5
        while not any(text in shown for shown in self.shown):
            assert time.monotonic() < deadline, self.shown
            self.changed.wait(0.05)
            self.changed.clear()


def spec(tmp_path: Path, name: str = "B", **extra: object) -> RunSpec:
    base = RunSpec(name, "deterministic", ["python", "t.py"], tmp_path, tmp_path / "runs" / name,
                   {}, None, tmp_path / f"{name}.log", [])
    return dataclasses.replace(base, **extra)


def trajectory(run_dir: Path, steps: int) -> Path:
    path = probe_output_dir(run_dir) / TRAJECTORY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{{"step": {n}}}\n' for n in range(steps)), encoding="utf-8")
    return path


def test_statuses_come_quickly_on_a_terminal_and_rarely_in_a_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(progress.ENV_STATUS_SECONDS, raising=False)
    assert progress.timing(live=True) == (progress.FIRST_STATUS_SECONDS,
                                          progress.TERMINAL_STATUS_SECONDS)
    assert progress.timing(live=False) == (progress.LOG_STATUS_SECONDS,
                                           progress.LOG_STATUS_SECONDS)
    monkeypatch.setenv(progress.ENV_STATUS_SECONDS, "0.5")
    assert progress.timing(live=False) == (0.5, 0.5)
    monkeypatch.setenv(progress.ENV_STATUS_SECONDS, "soon")
    assert progress.timing(live=True)[0] == progress.FIRST_STATUS_SECONDS


def test_the_step_counter_reads_only_what_was_added(tmp_path: Path) -> None:
    counter = progress.StepCounter(tmp_path)
    assert counter.count() == 0  # no file yet

    path = trajectory(tmp_path, 3)
    assert counter.count() == 3
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"step": 3}\n{"step": 4}\n')
    assert counter.count() == 5
    assert counter.offset == path.stat().st_size


def test_the_step_counter_never_reads_through_a_link(tmp_path: Path) -> None:
    elsewhere = trajectory(tmp_path / "elsewhere", 3)
    run_dir = tmp_path / "run"
    probe_output_dir(run_dir).mkdir(parents=True)
    os.symlink(elsewhere, probe_output_dir(run_dir) / TRAJECTORY_FILE)

    assert progress.StepCounter(run_dir).count() == 0


def test_the_rate_counts_from_the_first_step_seen() -> None:
    rate = progress.RunRate(started=0.0)

    assert rate.text(0, 40, now=3.0) == "no optimizer step yet, 3 s elapsed"
    assert rate.text(2, 40, now=10.0) == (
        "step 2 of 40, 0.2 steps/s, 10 s elapsed, about 3 min 10 s left")
    assert rate.text(12, 40, now=15.0) == (
        "step 12 of 40, 2 steps/s, 15 s elapsed, about 14 s left")
    assert rate.text(40, None, now=3725.0) == (
        "step 40, 0.0102 steps/s, 1 h 02 min elapsed")


def test_long_elapsed_times_are_written_in_minutes() -> None:
    assert progress.RunRate(0.0).text(1, 1, now=125.0) == (
        "step 1 of 1, 0.008 steps/s, 2 min 05 s elapsed")


def test_a_later_run_is_expected_to_take_run_as_steps(tmp_path: Path) -> None:
    trajectory(tmp_path / "runs" / "A", 7)

    assert progress.expected_steps(spec(tmp_path, "B")) == 7
    assert progress.expected_steps(spec(tmp_path, "A")) is None
    assert progress.expected_steps(spec(tmp_path, "default", mode="default")) is None
    assert progress.expected_steps(spec(tmp_path, "A", env={ENV_MAX_STEPS: "30"})) == 30


def test_a_run_is_watched_only_by_a_sink_that_shows_statuses(tmp_path: Path) -> None:
    run = spec(tmp_path, "A", env={ENV_MAX_STEPS: "10"})
    trajectory(run.run_dir, 4)
    lines: list[str] = []
    sink = Statuses()

    with progress.watching_run(run, lines.append):
        pass
    with progress.watching_run(run, sink):
        sink.wait_for("step 4 of 10")

    assert lines == []
    assert sink.ended.is_set()


def test_a_build_status_names_what_is_built_and_how_far_it_got() -> None:
    sink = Statuses()

    with progress.watching_build("the baseline environment", sink, lambda: "3 packages"):
        sink.wait_for("building the baseline environment: 3 packages, ")

    assert sink.shown[0].endswith(" s elapsed")
    assert sink.ended.is_set()


def test_a_long_phase_says_what_it_does_and_how_far_it_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(progress.ENV_STATUS_SECONDS, "0.05")
    said: list[str] = []

    with notices.sent_to(said.append), progress.watching_phase("copying", lambda: "3 files"):
        time.sleep(0.3)

    assert said and all(line.startswith("repro-gate: copying: 3 files, ") for line in said)
    assert said[-1].endswith(" s elapsed")


def test_a_short_phase_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV_STATUS_SECONDS, "5")
    said: list[str] = []

    with notices.sent_to(said.append), progress.watching_phase("copying"):
        pass

    assert said == []
