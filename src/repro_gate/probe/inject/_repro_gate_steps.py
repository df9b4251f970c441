"""The record of each optimizer step, gathered around the optimizer's step, read back lagged.

The pre-hook queues the gradients' digests (the optimizer may change them in place) and, before
the first step, the parameters as initialised; the post-hook adds the parameters after the
update, the step's input batch, the model's output, the loss and the model's buffers
(`_repro_gate_buffers`), and starts copying all of it
to the host in one transfer per device (`_repro_gate_host_read`). On the host (CPU) the record
is complete at once. On an accelerator it is read at the next step's post-hook, or when the run
ends (`flush`), so the host never waits for the device: the gate's fail-fast sees a step's
record one step later.

Sampling (host only): a full pass over every parameter and gradient at every step costs more
than the probe's budget on a CPU (docs/performance.md). So the parameters and gradients of
tensors of at least SAMPLE_MIN_ELEMENTS are digested 1/K at a time (K = SAMPLE_EVERY): at step s,
the ((s - 1) mod K)-th of K blocks of consecutive rows, so that every element is covered within
K steps; such a record says `"sampled": K`. The loss (exact bits), the input batch, the model's
output (`"outputs"`, sampled the same way on the host only when it is as large) and the
initial parameters are always recorded in full, as are smaller tensors, so a divergence shows
in the loss or the output at once or in the rotation within K steps, and the gate's fail-fast
still stops the run. What sampling costs is precision about where it
started (see compare/cause.py's caveat).
"""

from __future__ import annotations

import struct
from typing import Any

import torch
from _repro_gate_buffers import model_buffers
from _repro_gate_digest import PendingDigests, Sample, combine_digests, start_digests
from _repro_gate_host_read import HostRead
from _repro_gate_row_sums import as_integers, integer_dtype
from _repro_gate_step_inputs import StepInputs

NamedParameters = list[tuple[str, Any]]
SAMPLE_EVERY = 32  # K, from bench/probe_overhead.py: see docs/performance.md
SAMPLE_MIN_ELEMENTS = 1 << 16  # smaller tensors cost little more than the ops' overhead


class StepEvidence:
    """What the optimizer step pre-hook queued for the step's record."""

    def __init__(self, optimizer: Any, names: list[str], grads: PendingDigests,
                 init: PendingDigests | None) -> None:
        self.optimizer = optimizer
        self.names = names
        self.grads = grads
        self.init = init


class PendingRecord:
    """One step's record whose values are on their way to the host."""

    def __init__(self, header: dict[str, Any], names: list[str], params: PendingDigests,
                 calls: tuple[list[PendingDigests], list[PendingDigests]],
                 before: StepEvidence | None, loss: torch.Tensor | None, every: int,
                 buffers: tuple[list[str], PendingDigests] | None = None) -> None:
        self.header = header
        self.names = names
        self.params = params
        self.inputs, self.outputs = calls
        self.grads = before.grads if before is not None else None
        self.init = before.init if before is not None else None
        self.every = every
        self.buffer_names: list[str] = [] if buffers is None else buffers[0]
        self.buffers: PendingDigests | None = None if buffers is None else buffers[1]
        self._batches = [params, *self.inputs, *self.outputs,
                         *(b for b in (self.grads, self.init, self.buffers) if b is not None)]
        parts = [part for batch in self._batches for part in batch.parts]
        self.loss_dtype = None if loss is None else loss.dtype
        if loss is not None:  # its raw bits, turned back into a float on the host when read
            parts.append(as_integers(loss).to(torch.int64))
        self.read = HostRead(parts)

    def record(self) -> dict[str, Any]:
        """The step's line of trajectory.jsonl (waits for the copy to the host if needed)."""
        values = self.read.values()
        loss = None if self.loss_dtype is None else _loss_hex(values.pop()[0], self.loss_dtype)
        digests: dict[int, list[str | None]] = {}
        for batch in self._batches:
            digests[id(batch)] = batch.hex_digests(values[: len(batch.parts)])
            values = values[len(batch.parts) :]

        def by_name(batch: PendingDigests) -> dict[str, str | None]:
            return dict(zip(self.names, digests[id(batch)], strict=True))

        record = {**self.header, "loss": loss, "params": by_name(self.params),
                  "grads": by_name(self.grads) if self.grads is not None else None}
        record["inputs"] = _combined(self.inputs, digests)
        record["outputs"] = _combined(self.outputs, digests)
        if self.init is not None:
            record["init"] = by_name(self.init)
        if self.buffers is not None:
            record["buffers"] = dict(zip(self.buffer_names, digests[id(self.buffers)],
                                         strict=True))
        # The output's sampling is not the parameters' (see _repro_gate_step_inputs).
        if any(b.sampled for b in (self.params, self.grads, self.init, self.buffers)
               if b is not None):
            record["sampled"] = self.every
        return record


class StepRecorder:
    """Builds each step's record: `before_step` in the pre-hook, `after_step` in the post-hook."""

    def __init__(self, inputs: StepInputs | None, every: int = SAMPLE_EVERY) -> None:
        self._inputs = inputs
        self.every = every
        self._before: StepEvidence | None = None
        self._pending: PendingRecord | None = None

    def sample(self, step: int) -> Sample:
        return Sample(self.every, (step - 1) % self.every, SAMPLE_MIN_ELEMENTS)

    def before_step(self, optimizer: Any, named: NamedParameters, step: int) -> None:
        """Queue the gradients' digests and, at the first step, the initial parameters'."""
        self._before = None
        params = [param for _, param in named]
        grads = start_digests([param.grad for param in params],
                              sample=self.sample(step))
        init = start_digests(params) if step == 1 else None
        self._before = StepEvidence(optimizer, [name for name, _ in named], grads, init)

    def after_step(self, optimizer: Any, named: NamedParameters, header: dict[str, Any],
                   loss: torch.Tensor | None) -> list[dict[str, Any]]:
        """Queue the step's record; the records now complete (the previous step's, if it was
        lagged, then this one's unless it is lagged in turn).

        The pre-hook's evidence is ignored when it belongs to another optimizer, or when the
        parameters' names were learnt between the two hooks; `grads` is then null.
        """
        names = [name for name, _ in named]
        before, self._before = self._before, None
        if before is not None and (before.optimizer is not optimizer or before.names != names):
            before = None
        finished = self.flush()
        params = start_digests([param for _, param in named],
                               sample=self.sample(header["step"]))
        calls: tuple[list[PendingDigests], list[PendingDigests]] = ([], [])
        buffers = None
        if self._inputs is not None:
            calls = (self._inputs.take(), self._inputs.take_outputs())
            buffer_names, tensors = model_buffers(self._inputs.take_models())
            if buffer_names:
                buffers = (buffer_names,
                           start_digests(tensors, sample=self.sample(header["step"])))
        pending = PendingRecord(header, names, params, calls, before, loss, self.every, buffers)
        if pending.read.lagged:
            self._pending = pending
        else:
            finished.append(pending.record())
        return finished

    def flush(self) -> list[dict[str, Any]]:
        """The lagged record, if one is waiting (at the next step, or when the run ends)."""
        pending, self._pending = self._pending, None
        return [] if pending is None else [pending.record()]

    def reset(self) -> None:
        """Forget what the parent process had queued (in a forked child)."""
        self._before = self._pending = None


def _combined(batches: list[PendingDigests], digests: dict[int, list[str | None]]) -> str | None:
    """One digest of the tensors of a step's model calls, in call order; None without any."""
    found = [d for batch in batches for d in digests[id(batch)] if d is not None]
    return combine_digests(found) if found else None


_FLOAT_FORMATS = {torch.float64: ("<Q", "<d", 64), torch.float32: ("<I", "<f", 32),
                  torch.float16: ("<H", "<e", 16)}


def _loss_hex(bits: int, dtype: torch.dtype) -> str:
    """The loss's exact value from its raw bits (signed), in Python: no torch op runs."""
    if dtype == torch.bfloat16:  # the upper half of a float32
        bits, dtype = (bits & 0xFFFF) << 16, torch.float32
    if dtype in _FLOAT_FORMATS:
        integer, floating, width = _FLOAT_FORMATS[dtype]
        packed = struct.pack(integer, bits & ((1 << width) - 1))
        return float.hex(struct.unpack(floating, packed)[0])
    raw = torch.tensor([bits], dtype=integer_dtype(dtype))
    return float.hex(raw.view(dtype).item())  # float8 and the like
