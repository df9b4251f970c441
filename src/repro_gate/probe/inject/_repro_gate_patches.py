"""Patches of interpreter and torch entry points that let the probe see what training does.

Each patch wraps the original and calls it as before; a failure in the probe's callback is
reported through `on_error` and never reaches the user's code.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any


def wrap_backward(torch: Any, note_loss: Callable[[Any], None]) -> None:
    """Make `Tensor.backward` and `torch.autograd.backward` show their tensor to `note_loss`."""
    tensor_backward = torch.Tensor.backward
    autograd_backward = torch.autograd.backward

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        note_loss(self)
        return tensor_backward(self, *args, **kwargs)

    def autograd_backward_wrapper(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensors, (list, tuple)):
            note_loss(tensors[0] if len(tensors) == 1 else None)
        else:
            note_loss(tensors)
        return autograd_backward(tensors, *args, **kwargs)

    backward.__doc__ = tensor_backward.__doc__
    autograd_backward_wrapper.__doc__ = autograd_backward.__doc__
    torch.Tensor.backward = backward
    torch.autograd.backward = autograd_backward_wrapper


def wrap_showwarnmsg(
    on_warning: Callable[[warnings.WarningMessage, FrameType], bool],
    on_error: Callable[[str], None],
) -> None:
    """Show each warning to `on_warning` first; it returns False to keep a repeat quiet."""
    original = warnings._showwarnmsg  # type: ignore[attr-defined]
    original_impl = warnings._showwarnmsg_impl  # type: ignore[attr-defined]

    def _showwarnmsg(message: warnings.WarningMessage) -> None:
        show = True
        try:
            show = on_warning(message, sys._getframe(1))
        except Exception as error:
            on_error(f"recording a warning: {error!r}")
        # While someone records warnings (catch_warnings(record=True)) they get every one.
        if show or warnings._showwarnmsg_impl is not original_impl:  # type: ignore[attr-defined]
            original(message)

    warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]


def chain_excepthooks(
    on_uncaught: Callable[[BaseException | None, Any, bool], None],
    on_error: Callable[[str], None],
) -> None:
    """Show uncaught exceptions to `on_uncaught(error, tb, finish)`, then to the previous hooks.

    `finish` is True for the main thread (the process is about to end), False for other threads.
    """
    previous_hook = sys.excepthook
    previous_thread_hook = threading.excepthook

    def excepthook(kind: Any, error: Any, tb: Any) -> None:
        try:
            on_uncaught(error, tb, True)
        except Exception as failure:
            on_error(f"recording an uncaught exception: {failure!r}")
        previous_hook(kind, error, tb)

    def thread_excepthook(args: Any) -> None:
        try:
            on_uncaught(args.exc_value, args.exc_traceback, False)
        except Exception as failure:
            on_error(f"recording an uncaught exception: {failure!r}")
        previous_thread_hook(args)

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
