"""Why two runs diverge: the cause of the first divergent step, from the probe's step records.

The records follow a training step in order (the initial parameters, the input batch, the loss,
the gradients before the update, the parameters after it), and the first of them that differs
between the runs is the cause. A cause needs its record in both runs, and every record before it
equal: otherwise it is `unknown`, with a note saying which record was missing. At a step after
the first, the initial parameters are known equal (they would have changed step 1).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

StepRecord = dict[str, Any]


class Cause(StrEnum):
    INITIALIZATION = "initialization"
    INPUT = "input"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    UNKNOWN = "unknown"


# Earlier in the step comes first: at equal step, the rank whose cause is earlier is where the
# evidence starts (rank 1's input differs, so both ranks' all-reduced gradients differ).
CAUSE_ORDER = list(Cause)


class Diagnosis(TypedDict, total=False):
    cause: str
    initial_parameters: list[str]
    gradients: list[str]
    note: str


def classify(a: StepRecord, b: StepRecord) -> Diagnosis:
    """The cause of the divergence at the step of records `a` and `b` (earlier steps equal)."""
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
