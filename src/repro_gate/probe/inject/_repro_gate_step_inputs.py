"""The input batch of a step: digests of the tensors passed to the model's outermost calls.

A root (a module called at depth 0, see `_repro_gate_param_names`) counts as the model when it
has parameters, so a loss module called on the model's output does not. Of its arguments, only
tensors that come from outside autograd (no `grad_fn`) are the batch: a tensor computed by
another model (a GAN's generator output) is a forward result, not data. Calls made without grad
mode (evaluation) are not training inputs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from _repro_gate_digest import PendingDigests, start_digests

MAX_NESTING = 4  # how deep lists, tuples and dicts of tensors are searched


class StepInputs:
    """Collects the digests of the model's inputs between two optimizer steps."""

    def __init__(self, torch: Any, on_error: Callable[[str], None]) -> None:
        self._torch = torch
        self._on_error = on_error
        self._hooked: weakref.WeakSet[Any] = weakref.WeakSet()
        self._pending: list[PendingDigests] = []

    def on_root_call(self, module: Any, args: Any, kwargs: Any) -> None:
        """A root module's call ended (seen by the global hooks, which run only until every
        parameter has a name): hook the root for later calls, and count this call's inputs."""
        if module in self._hooked or not _has_parameters(module):
            return
        try:
            module.register_forward_pre_hook(self._on_call, with_kwargs=True)
            self._hooked.add(module)
        except Exception as error:
            self._on_error(f"watching the model's inputs: {error!r}")
            return
        self._on_call(module, args, kwargs)

    def take(self) -> list[PendingDigests]:
        """The step's pending input digests, in call order; the next step starts empty."""
        pending, self._pending = self._pending, []
        return pending

    def _on_call(self, module: Any, args: Any, kwargs: Any) -> None:
        try:
            if not self._torch.is_grad_enabled():
                return
            tensors: list[Any] = []
            self._collect((args, kwargs or {}), tensors, 0)
            if tensors:
                self._pending.append(start_digests(tensors, ordered=True))
        except Exception as error:
            self._on_error(f"digesting the model's inputs: {error!r}")

    def _collect(self, value: Any, into: list[Any], depth: int) -> None:
        if isinstance(value, self._torch.Tensor):
            if value.grad_fn is None and not value.requires_grad:
                into.append(value)
        elif depth < MAX_NESTING and isinstance(value, (list, tuple)):
            for item in value:
                self._collect(item, into, depth + 1)
        elif depth < MAX_NESTING and isinstance(value, dict):
            for key in sorted(value, key=str):
                self._collect(value[key], into, depth + 1)


def _has_parameters(module: Any) -> bool:
    return next(iter(module.parameters()), None) is not None
