"""Status lines while something long runs, so the user is never left in silence.

While a run lasts, a thread reads how many optimizer steps the probe has recorded (the
trajectory file grows by one line a step; only the new bytes are read) and hands the sink a
status: which run, steps done, steps/s, elapsed, and the time left when the run's length is
known (a run after A is expected to take A's steps). While an environment builds, the status
is what is built and for how long.

The sink decides how a status is shown (cli/sinks.py): a line rewritten in place on a terminal,
a plain line every LOG_STATUS_SECONDS in a log, each with the run's name (the sink's).
A sink without `status` shows nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from repro_gate import notices
from repro_gate.errors import GateError
from repro_gate.launch.base import RunSpec
from repro_gate.probe import ENV_MAX_STEPS, PROBE_SUBDIR, TRAJECTORY_FILE, run_files

# Seconds before the first status on a terminal, between statuses there and in a log.
FIRST_STATUS_SECONDS = 5.0
LOG_STATUS_SECONDS = 30.0
TERMINAL_STATUS_SECONDS = 1.0
# Overrides both intervals (tests use a short one).
ENV_STATUS_SECONDS = "REPRO_GATE_STATUS_SECONDS"
FIRST_RUN = "A"
TRAJECTORY_PATH = f"{PROBE_SUBDIR}/{TRAJECTORY_FILE}"  # in a run's folder


@runtime_checkable
class StatusSink(Protocol):
    """A run's sink that also shows status lines."""

    def __call__(self, line: str) -> None: ...

    def status(self, text: str) -> None:
        """Show `text` as the current status (replacing the previous one where it can)."""
        ...

    def status_timing(self) -> tuple[float, float]:
        """Seconds before the first status, and between two statuses."""
        ...

    def end_status(self) -> None:
        """The watched thing is over (a status rewritten in place is erased)."""
        ...


def timing(live: bool) -> tuple[float, float]:
    """(first, every): seconds before the first status and between two. On a terminal the
    status is live after a few seconds; in a log a line comes every LOG_STATUS_SECONDS, so a
    short run adds none. ENV_STATUS_SECONDS, when set, is both."""
    try:
        value = float(os.environ.get(ENV_STATUS_SECONDS, ""))
    except ValueError:
        value = 0.0
    if value > 0:
        return value, value
    if live:
        return FIRST_STATUS_SECONDS, TERMINAL_STATUS_SECONDS
    return LOG_STATUS_SECONDS, LOG_STATUS_SECONDS


@dataclass
class StepCounter:
    """The number of lines in a run's trajectory file, which only grows, reading only what was
    added, never through a link (probe/run_files.py)."""

    run_dir: Path
    offset: int = 0
    lines: int = 0

    def count(self) -> int:
        try:
            added = run_files.read_bytes(self.run_dir, TRAJECTORY_PATH, self.offset) or b""
        except (OSError, GateError):  # a link in the run: the gate's readers report it
            return self.lines
        self.offset += len(added)
        self.lines += added.count(b"\n")
        return self.lines


@dataclass
class RunRate:
    """Steps/s between the first and the latest step seen (start-up, imports and the time
    after the last step do not count)."""

    started: float
    first_seen: tuple[float, int] | None = None
    last_seen: tuple[float, int] | None = None

    def text(self, steps: int, expected: int | None, now: float) -> str:
        """`step 12 of 40, 3.1 steps/s, 8 s elapsed, about 9 s left`."""
        elapsed = now - self.started
        if steps == 0:
            return f"no optimizer step yet, {_seconds(elapsed)} elapsed"
        if self.first_seen is None:
            self.first_seen = (now, steps)
        if self.last_seen is None or steps > self.last_seen[1]:
            self.last_seen = (now, steps)
        (first_at, first_steps), (last_at, last_steps) = self.first_seen, self.last_seen
        rate = ((last_steps - first_steps) / (last_at - first_at) if last_steps > first_steps
                else steps / max(elapsed, 1e-9))
        done = f"step {steps}" + (f" of {expected}" if expected else "")
        text = f"{done}, {rate:.3g} steps/s, {_seconds(elapsed)} elapsed"
        if expected and expected > steps:
            text += f", about {_seconds((expected - steps) / rate)} left"
        return text


class Ticker:
    """Calls `tick` every `interval` seconds (the first after `first`) in a daemon thread."""

    def __init__(self, tick: Callable[[], None], first: float, interval: float) -> None:
        self._tick = tick
        self._first = first
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _loop(self) -> None:
        wait = self._first
        while not self._stop.wait(wait):
            try:
                self._tick()
            except (OSError, ValueError):  # a closed stream: stop showing, never fail the run
                return
            wait = self._interval


@contextmanager
def watching_run(spec: RunSpec, sink: object) -> Iterator[None]:
    """Status lines for run `spec` while the block runs (when the sink shows them)."""
    if not isinstance(sink, StatusSink):
        yield
        return
    counter = StepCounter(spec.run_dir)
    expected = expected_steps(spec)
    rate = RunRate(time.monotonic())

    def tick() -> None:
        sink.status(rate.text(counter.count(), expected, time.monotonic()))

    with _ticking(tick, sink):
        yield


@contextmanager
def watching_build(what: str, sink: object,
                   so_far: Callable[[], str] | None = None) -> Iterator[None]:
    """Status lines naming `what` is built, how far it got (`so_far`: packages, bytes) and for
    how long, while the block runs."""
    if not isinstance(sink, StatusSink):
        yield
        return
    started = time.monotonic()

    def tick() -> None:
        done = f"{so_far()}, " if so_far else ""
        sink.status(f"building {what}: {done}{_seconds(time.monotonic() - started)} elapsed")

    with _ticking(tick, sink):
        yield


@contextmanager
def watching_phase(what: str, so_far: Callable[[], str] | None = None) -> Iterator[None]:
    """A notice every LOG_STATUS_SECONDS (ENV_STATUS_SECONDS when set) while a phase of the gate
    lasts: making or removing a working copy, collecting or hashing artifacts, comparing
    checkpoints. Notices show with --quiet too: the user is never left in silence."""
    _, every = timing(live=False)
    started = time.monotonic()

    def tick() -> None:
        done = f"{so_far()}, " if so_far else ""
        notices.say(f"{what}: {done}{_seconds(time.monotonic() - started)} elapsed")

    with Ticker(tick, every, every):
        yield


@contextmanager
def _ticking(tick: Callable[[], None], sink: StatusSink) -> Iterator[None]:
    first, interval = sink.status_timing()
    try:
        with Ticker(tick, first, interval):
            yield
    finally:
        sink.end_status()


def expected_steps(spec: RunSpec) -> int | None:
    """How many steps the run should take: its step limit, else run A's steps for a later
    deterministic run (beside it), else unknown."""
    limit = spec.env.get(ENV_MAX_STEPS)
    if limit and limit.isdigit():
        return int(limit)
    if spec.mode != "deterministic" or spec.name == FIRST_RUN:
        return None
    return StepCounter(spec.run_dir.parent / FIRST_RUN).count() or None


def _seconds(value: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    total = round(value)
    if total < 60:
        return f"{total} s"
    minutes, seconds = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
