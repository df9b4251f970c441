"""The hard deadline of network work: time left on a clock, and work held to it in a thread."""

from __future__ import annotations

import threading
import time

import pytest

from repro_gate.errors import PublishError
from repro_gate.publish.deadline import Deadline, DeadlineExceeded, call_within


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_shrinks_with_the_clock_and_never_goes_below_zero() -> None:
    clock = Clock()
    deadline = Deadline(5.0, clock=clock)
    assert deadline.remaining() == 5.0 and not deadline.expired()
    clock.now += 3.5
    assert deadline.remaining() == 1.5
    clock.now += 10
    assert deadline.remaining() == 0.0 and deadline.expired()


def test_work_done_in_time_gives_its_result() -> None:
    assert call_within(lambda: 6 * 7, 2.0, "answer") == 42
    assert Deadline(2.0).run(lambda: "done", "work") == "done"


def test_an_exception_of_the_work_reaches_the_caller_unchanged() -> None:
    def broken() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        call_within(broken, 2.0, "broken work")


def test_work_past_the_deadline_is_abandoned_with_a_named_error() -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"^slow push: no answer within 0\.1s$") as caught:
        call_within(lambda: release.wait(5), 0.1, "slow push")
    assert time.monotonic() - started < 2.0
    assert isinstance(caught.value, PublishError)
    release.set()


def test_a_limit_sooner_than_the_deadline_holds_the_work_to_it() -> None:
    release = threading.Event()
    with pytest.raises(DeadlineExceeded, match=r"no answer within 0\.05s"):
        Deadline(30.0).run(lambda: release.wait(5), "read", limit=0.05)
    release.set()


def test_an_expired_deadline_gives_no_time_at_all() -> None:
    clock = Clock()
    deadline = Deadline(1.0, clock=clock)
    clock.now += 2
    release = threading.Event()
    with pytest.raises(DeadlineExceeded, match="no answer within 0s"):
        deadline.run(lambda: release.wait(5), "late")
    release.set()
