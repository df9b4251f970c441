"""Why two runs diverge: the cause of the first divergent step, from the probe's step records.

The records follow a training step in order (the initial parameters, the input batch, the
model's output, the loss, the gradients before the update, the parameters after it), and the
first of them that differs between the runs is the cause. The model's output (`outputs`) is
compared only when both records have it (records of earlier probes do not): a forward pass that
changed by a tiny amount can leave the loss's bits equal, and its output still tells it apart
from the backward pass. A cause needs its record in both runs, and every record before it
equal: otherwise it is `unknown`, with a note saying which record was missing. At a step after
the first, the initial parameters are known equal (they would have changed step 1).

On CPU the probe samples the digests of large parameters and gradients (`"sampled": K`: 1/K of
each such tensor per step, all of it within K steps; loss, inputs and initial parameters are
always whole).
A difference it sees is real, but an equal digest says nothing of the rows it skipped: the
divergence may have begun in those rows, in the backward pass or the optimizer, up to K - 1
steps earlier, and showed first in the loss or a later sample. A `forward`, `backward` or
`optimizer` cause on sampled records then carries a note saying so (`sampling_caveat`).
"""

from __future__ import annotations

from typing import Any, TypedDict

from repro_gate.errors import StrEnum

StepRecord = dict[str, Any]


class Cause(StrEnum):
    INITIALIZATION = "initialization"
    INPUT = "input"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    BUFFERS = "buffers"  # parameters and loss agree, the model's buffers do not
    UNKNOWN = "unknown"


# Earlier in the step comes first: at equal step, the rank whose cause is earlier is where the
# evidence starts (rank 1's input differs, so both ranks' all-reduced gradients differ).
CAUSE_ORDER = list(Cause)
# The causes that rest on an equal digest of the parameters or gradients (see the docstring).
_SAMPLED_CAUSES = (Cause.FORWARD, Cause.BACKWARD, Cause.OPTIMIZER)


class Diagnosis(TypedDict, total=False):
    cause: str
    initial_parameters: list[str]
    gradients: list[str]
    note: str


def classify(a: StepRecord, b: StepRecord) -> Diagnosis:
    """The cause of the divergence at the step of records `a` and `b` (earlier steps equal)."""
    diagnosis = _classify(a, b)
    caveat = sampling_caveat(diagnosis.get("cause"), a, b)
    if caveat:
        diagnosis["note"] = caveat
    return diagnosis


def sampling_caveat(cause: str | None, a: StepRecord, b: StepRecord) -> str | None:
    """What sampled records cannot rule out for `cause` at their step; None when nothing."""
    every = max(_sampled(a), _sampled(b))
    step = a.get("step")
    if every <= 1 or not isinstance(step, int) or cause not in _SAMPLED_CAUSES:
        return None
    first = max(1, step - every + 1)
    last = step if cause == Cause.OPTIMIZER else step - 1  # the gradients of its own step too
    if last < first:
        return None  # at step 1 the parameters before the step are the initial ones, whole
    steps = f"step {first}" if first == last else f"steps {first} to {last}"
    return (f"parameters and gradients of large tensors were sampled (1/{every} of each per"
            f" step), so the divergence may have begun in rows not sampled, in the backward pass"
            f" or the optimizer of {steps}")


def _sampled(record: StepRecord) -> int:
    every = record.get("sampled")
    return every if isinstance(every, int) else 1


def _classify(a: StepRecord, b: StepRecord) -> Diagnosis:
    if a.get("step") == 1:
        init_a, init_b = a.get("init"), b.get("init")
        if not isinstance(init_a, dict) or not isinstance(init_b, dict):
            return _unknown("the initial parameters were not recorded")
        initial = differing(init_a, init_b)
        if initial:
            return {"cause": Cause.INITIALIZATION, "initial_parameters": initial}
    inputs_a, inputs_b = a.get("inputs"), b.get("inputs")
    if inputs_a is None or inputs_b is None:
        return _unknown("the model's inputs were not recorded (no call of a module with"
                        " parameters under grad mode)")
    if inputs_a != inputs_b:
        return {"cause": Cause.INPUT}
    outputs_a, outputs_b = a.get("outputs"), b.get("outputs")
    if outputs_a is not None and outputs_b is not None and outputs_a != outputs_b:
        return {"cause": Cause.FORWARD}  # the loss may still round to the same bits
    loss_a, loss_b = a.get("loss"), b.get("loss")
    if loss_a is None or loss_b is None:
        return _unknown("the loss was not recorded (no backward() of a scalar)")
    if loss_a != loss_b:
        return {"cause": Cause.FORWARD}
    grads_a, grads_b = a.get("grads"), b.get("grads")
    if not isinstance(grads_a, dict) or not isinstance(grads_b, dict):
        return _unknown("the gradients were not recorded")
    gradients = differing(grads_a, grads_b)
    if gradients:
        return {"cause": Cause.BACKWARD, "gradients": gradients}
    return {"cause": Cause.OPTIMIZER, "gradients": []}


def differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Names whose digests differ or that only one side has, in `a`'s order then `b`'s."""
    names = [name for name, digest in a.items() if name not in b or b[name] != digest]
    return names + [name for name in b if name not in a]


def cause_rank(cause: str | None) -> int:
    """Position of a cause in a step (unknown, and no cause at all, last)."""
    return CAUSE_ORDER.index(Cause(cause)) if cause in CAUSE_ORDER else len(CAUSE_ORDER)


def _unknown(note: str) -> Diagnosis:
    return {"cause": Cause.UNKNOWN, "note": note}
