"""The digests of one optimizer step's record, gathered around the optimizer's step.

The pre-hook queues the gradients (the optimizer may change them in place) and, before the first
step, the parameters as initialised; the post-hook adds the parameters after the update and the
step's input batch, and reads them all back at once (one host transfer per device).
"""

from __future__ import annotations

from typing import Any

from _repro_gate_digest import PendingDigests, combine_digests, finish_digests, start_digests
from _repro_gate_step_inputs import StepInputs

NamedParameters = list[tuple[str, Any]]


class StepEvidence:
    """What the optimizer step pre-hook queued for the step's record."""

    def __init__(self, optimizer: Any, names: list[str], grads: PendingDigests,
                 init: PendingDigests | None) -> None:
        self.optimizer = optimizer
        self.names = names
        self.grads = grads
        self.init = init


def evidence_before_step(optimizer: Any, named: NamedParameters, first: bool) -> StepEvidence:
    """Queue the gradients' digests and, at the first step, the initial parameters'."""
    params = [param for _, param in named]
    grads = start_digests([param.grad for param in params], ordered=False)
    init = start_digests(params, ordered=False) if first else None
    return StepEvidence(optimizer, [name for name, _ in named], grads, init)


def step_digests(
    optimizer: Any, named: NamedParameters, before: StepEvidence | None,
    inputs: StepInputs | None,
) -> dict[str, Any]:
    """`params`, `grads`, `inputs` and (first step) `init` of the step's record.

    `before` is ignored when it belongs to another optimizer, or when the parameters' names were
    learnt between the two hooks; `grads` is then null.
    """
    names = [name for name, _ in named]
    if before is not None and (before.optimizer is not optimizer or before.names != names):
        before = None
    batches = [start_digests([param for _, param in named], ordered=False)]
    if before is not None:
        batches += [before.grads] + ([before.init] if before.init is not None else [])
    input_batches = inputs.take() if inputs is not None else []
    digests = finish_digests(*batches, *input_batches)
    record: dict[str, Any] = {
        "params": dict(zip(names, digests[0], strict=True)),
        "grads": dict(zip(names, digests[1], strict=True)) if before is not None else None,
        "inputs": None,
    }
    input_digests = [d for batch in digests[len(batches):] for d in batch if d is not None]
    if input_digests:
        record["inputs"] = combine_digests(input_digests)
    if before is not None and before.init is not None:
        record["init"] = dict(zip(names, digests[2], strict=True))
    return record
