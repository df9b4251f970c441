"""The model's calls in a step: digests of its input batch and of its output.

A root (a module called at depth 0, seen by the global module hooks of `_repro_gate_param_names`)
counts as the model when it has parameters, so a loss module called on the model's output does
not. Of its arguments, only tensors that come from outside autograd (no `grad_fn`) are the batch:
a tensor computed by another model (a GAN's generator output) is a forward result, not data.
Every tensor of its output is digested: a forward pass that changed by a tiny amount shows there
even when the loss rounds to the same bits (the digest's weighted columns see an ULP moved up
in one element and down in another). On the host, an output of at least
SAMPLE_MIN_ELEMENTS (a language model's logits) is digested one block of rows in SAMPLE_EVERY
at a time, rotating call by call, as parameters are (_repro_gate_steps): whole, its
digest could cost a third of such a step on CPU. A change in rows not sampled leaves the
outputs equal, and the gradients tell it: the cause is then `backward`, and the gate's
localisation run, which every `backward` cause gets, finds the module. Calls made without grad mode
(evaluation) are not training calls. Both digests are taken when the call ends, before the
user's own forward hooks run.

Nothing is registered on the user's modules: torch's global hooks see every call, and this
object keeps only weak references to the step's models (for their buffers, _repro_gate_buffers).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from _repro_gate_digest import PendingDigests, Sample, start_digests

MAX_NESTING = 4  # how deep lists, tuples and dicts of tensors are searched


class StepInputs:
    """Collects the digests of the model's inputs and outputs between two optimizer steps."""

    def __init__(self, torch: Any, on_error: Callable[[str], None],
                 sample: tuple[int, int] = (1, 0)) -> None:
        self._torch = torch
        self._on_error = on_error
        self._pending: list[PendingDigests] = []
        self._outputs: list[PendingDigests] = []
        self._every, self._min_elements = sample  # how large outputs are sampled on the host
        self._calls = 0  # the model's calls digested: the sampled block rotates with them
        self._models: list[weakref.ref[Any]] = []  # the step's models, in call order

    def on_root_call(self, module: Any, args: Any, kwargs: Any, output: Any = None) -> None:
        """A root module's call ended: digest its inputs and output if it is the model."""
        try:
            if not self._torch.is_grad_enabled() or not _has_parameters(module):
                return
            if all(ref() is not module for ref in self._models):
                self._models.append(weakref.ref(module))
            tensors: list[Any] = []
            self._collect((args, kwargs or {}), tensors, 0, batch_only=True)
            if tensors:
                self._pending.append(start_digests(tensors))
            results: list[Any] = []
            self._collect(output, results, 0, batch_only=False)
            if results:
                sample = Sample(self._every, self._calls % self._every, self._min_elements)
                self._calls += 1
                self._outputs.append(start_digests(results, sample=sample))
        except Exception as error:
            self._on_error(f"digesting the model's inputs and output: {error!r}")

    def take(self) -> list[PendingDigests]:
        """The step's pending input digests, in call order; the next step starts empty."""
        pending, self._pending = self._pending, []
        return pending

    def take_outputs(self) -> list[PendingDigests]:
        """The step's pending output digests, in call order; the next step starts empty."""
        pending, self._outputs = self._outputs, []
        return pending

    def take_models(self) -> list[weakref.ref[Any]]:
        """The models called in the step, first call first; the next step starts empty."""
        models, self._models = self._models, []
        return models

    def _collect(self, value: Any, into: list[Any], depth: int, batch_only: bool) -> None:
        if isinstance(value, self._torch.Tensor):
            if not batch_only:
                into.append(value.detach())
            elif value.grad_fn is None and not value.requires_grad:
                into.append(value)
        elif depth < MAX_NESTING and isinstance(value, (list, tuple)):
            for item in value:
                self._collect(item, into, depth + 1, batch_only)
        elif depth < MAX_NESTING and isinstance(value, dict):
            for key in sorted(value, key=str):
                self._collect(value[key], into, depth + 1, batch_only)


def _has_parameters(module: Any) -> bool:
    return next(iter(module.parameters()), None) is not None
