"""A hard deadline for network work: publishing never holds the gate longer than its setting.

A socket timeout bounds one read, not an exchange: a server that trickles a byte a second never
trips it. So the exchange runs in a worker thread, and the caller stops waiting at the deadline.
A worker still stuck then is a daemon thread: it is abandoned, and it dies with the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from repro_gate.errors import PublishError

T = TypeVar("T")


class DeadlineExceeded(PublishError):
    """The work did not finish before its deadline."""


class Deadline:
    """`seconds` from now; `run` holds work to what is left of it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._ends = clock() + seconds

    def remaining(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self._ends - self._clock())

    def expired(self) -> bool:
        """Whether no time is left."""
        return self.remaining() <= 0

    def run(self, work: Callable[[], T], what: str, limit: float | None = None) -> T:
        """`work()`'s result or exception; DeadlineExceeded when it is not done in the time
        left (or within `limit` seconds, when that is sooner)."""
        wait = self.remaining() if limit is None else min(limit, self.remaining())
        return call_within(work, wait, what)


def call_within(work: Callable[[], T], seconds: float, what: str) -> T:
    """`work()` run in a daemon thread; DeadlineExceeded after `seconds` without an answer."""
    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(work())
        except BaseException as error:  # handed to the caller, who decides
            errors.append(error)

    worker = threading.Thread(target=target, name=f"repro-gate {what}", daemon=True)
    worker.start()
    worker.join(timeout=max(seconds, 0.0))
    if worker.is_alive():
        raise DeadlineExceeded(f"{what}: no answer within {seconds:.3g}s")
    if errors:
        raise errors[0]
    return values[0]
