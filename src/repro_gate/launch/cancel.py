"""Cancellation of the gate by a signal (a CI cancel: SIGINT, then SIGTERM; a closed terminal).

The commands install the handlers with `on_signals()`. The first signal raises a `GateError` of
kind `cancelled` in the main thread, wherever it is; the launchers stop their runs on the way out
and the pipeline records the error manifest. Later signals are ignored, so they cannot cut that
clean-up short. Clean-up that must finish runs under `deferred()`: a signal arriving there is
raised at its end instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType, TracebackType

from repro_gate.errors import ErrorKind, GateError

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class _State:
    raised: bool = False  # the cancellation was raised: later signals are ignored
    pending: str | None = None  # a signal that arrived during deferred clean-up
    deferring: int = 0  # depth of `deferred()` blocks
    ignoring: bool = False  # the verdict is decided: a signal no longer interrupts the gate


_state = _State()


def cancelled(signal_name: str) -> GateError:
    """The error a signal becomes; the pipeline adds which run and step it interrupted."""
    return GateError(f"cancelled by {signal_name}", kind=ErrorKind.CANCELLED)


def _handle(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    if _state.raised:
        return
    if _state.deferring or _state.ignoring:  # raised later, or only remembered
        _state.pending = _state.pending or name
        return
    _state.raised = True
    raise cancelled(name)


@contextmanager
def on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP cancel the gate while the block runs.

    Installed explicitly, because in the action's container the gate is PID 1, where the kernel
    drops every signal without a handler. Outside the main thread nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _state
    _state = _State()
    previous = {sig: signal.signal(sig, _handle) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def deferred() -> _Deferred:
    """A block a signal must not interrupt (killing a run's processes); it is raised at its end."""
    return _Deferred()


class _Deferred:
    """The context manager `deferred()` returns."""

    def __enter__(self) -> None:
        _state.deferring += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        del exc_type, exc, traceback
        _state.deferring -= 1
        if _state.deferring or _state.pending is None or _state.raised or _state.ignoring:
            return
        name, _state.pending = _state.pending, None
        _state.raised = True
        # Also when leaving with another error: the cancellation is what the user asked for.
        raise cancelled(name)


def happened() -> bool:
    """Whether a signal cancelled (or tried to cancel) the gate since `on_signals()` began."""
    return _state.raised or _state.pending is not None


def ignore_from_now() -> None:
    """The verdict is decided: let the gate write and publish it instead of cancelling."""
    _state.ignoring = True


def listen_again() -> None:
    """Signals cancel again after `ignore_from_now()`: `repro-gate upgrade` runs one gate after
    another. A signal that arrived while a gate was writing its verdict is raised now."""
    _state.ignoring = False
    if _state.pending is not None and not _state.raised and not _state.deferring:
        name, _state.pending = _state.pending, None
        _state.raised = True
        raise cancelled(name)
