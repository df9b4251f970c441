"""Cancellation by a signal: the first one raises, later ones are ignored, clean-up that must
finish is not interrupted, and a decided verdict is not cancelled."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch import cancel


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    """Each test starts and ends with no cancellation recorded."""
    with cancel.on_signals():
        pass
    yield
    with cancel.on_signals():
        pass


def send(sig: signal.Signals) -> None:
    """Deliver `sig` to this process; Python runs the handler before the next line."""
    os.kill(os.getpid(), sig)
    time.sleep(0.01)


def test_a_signal_becomes_a_cancelled_error() -> None:
    with pytest.raises(GateError) as raised, cancel.on_signals():
        send(signal.SIGTERM)

    assert raised.value.kind == ErrorKind.CANCELLED
    assert raised.value.message == "cancelled by SIGTERM"
    assert cancel.happened()


def test_the_previous_handlers_come_back_after_the_block() -> None:
    before = signal.getsignal(signal.SIGTERM)

    with cancel.on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before

    assert signal.getsignal(signal.SIGTERM) is before


def test_later_signals_are_ignored_so_the_clean_up_can_finish() -> None:
    cleaned = False
    with pytest.raises(GateError, match="SIGINT"), cancel.on_signals():
        try:
            send(signal.SIGINT)
        finally:
            send(signal.SIGTERM)  # a second signal during the clean-up raises nothing
            cleaned = True

    assert cleaned


def test_a_signal_during_deferred_clean_up_is_raised_at_its_end() -> None:
    steps = []
    with pytest.raises(GateError, match="SIGHUP"), cancel.on_signals():
        with cancel.deferred():
            with cancel.deferred():
                send(signal.SIGHUP)
                steps.append("inner")
            steps.append("outer")  # the inner block's end raises nothing yet
        steps.append("after")

    assert steps == ["inner", "outer"]


def test_a_decided_verdict_is_not_cancelled_until_the_gate_listens_again() -> None:
    with cancel.on_signals():
        cancel.ignore_from_now()
        send(signal.SIGTERM)
        assert cancel.happened()  # remembered, not raised
        with pytest.raises(GateError, match="cancelled by SIGTERM"):
            cancel.listen_again()
        cancel.listen_again()  # raised once only


def test_without_a_signal_nothing_happened() -> None:
    with cancel.on_signals():
        with cancel.deferred():
            pass
        cancel.ignore_from_now()
        cancel.listen_again()
        assert not cancel.happened()
    assert cancel.cancelled("SIGINT").message == "cancelled by SIGINT"
