"""The cause of a divergence from two step records: the first record of the step that differs,
`unknown` when one is missing, and the caveat that sampled digests carry."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.compare.cause import (
    CAUSE_ORDER,
    Cause,
    cause_rank,
    classify,
    differing,
    sampling_caveat,
)


def record(step: int = 1, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"step": step, "inputs": "i", "loss": "0x1p+0",
                            "grads": {"w": "g", "b": "h"}, "params": {"w": "p", "b": "q"}}
    if step == 1:
        base["init"] = {"w": "w0", "b": "b0"}
    return {**base, **changes}


def test_different_initial_parameters_at_step_1_are_the_initialization() -> None:
    diagnosis = classify(record(), record(init={"w": "other", "b": "b0"}, inputs="j"))
    assert diagnosis == {"cause": Cause.INITIALIZATION, "initial_parameters": ["w"]}


def test_each_record_in_step_order_names_its_cause() -> None:
    assert classify(record(), record(inputs="j"))["cause"] == Cause.INPUT
    assert classify(record(), record(loss="0x1.8p+0"))["cause"] == Cause.FORWARD
    backward = classify(record(), record(grads={"w": "g", "b": "other"}))
    assert backward == {"cause": Cause.BACKWARD, "gradients": ["b"]}
    # Everything before the update equal: the optimizer changed the parameters.
    assert classify(record(), record(params={"w": "x", "b": "q"})) == {
        "cause": Cause.OPTIMIZER, "gradients": []}


def test_after_step_1_the_initial_parameters_are_not_looked_at() -> None:
    diagnosis = classify(record(step=4), record(step=4, init={"w": "other"}, inputs="j"))
    assert diagnosis["cause"] == Cause.INPUT


@pytest.mark.parametrize(("missing", "said"), [
    ("init", "initial parameters were not recorded"),
    ("inputs", "inputs were not recorded"),
    ("loss", "loss was not recorded"),
    ("grads", "gradients were not recorded"),
])
def test_a_record_missing_on_one_side_makes_the_cause_unknown(missing: str, said: str) -> None:
    b = record(**{"params": {"w": "x", "b": "q"}})
    del b[missing]
    diagnosis = classify(record(), b)
    assert diagnosis["cause"] == Cause.UNKNOWN
    assert said in diagnosis["note"]


def test_a_changed_output_is_the_forward_pass_even_with_equal_loss_bits() -> None:
    assert classify(record(outputs="o"), record(outputs="o2"))["cause"] == Cause.FORWARD
    # Only one side recorded its output (an earlier probe): the output is not compared.
    assert classify(record(outputs="o"), record(grads={"w": "x", "b": "h"}))["cause"] == (
        Cause.BACKWARD)


def test_sampled_records_carry_a_caveat_over_the_steps_they_cannot_rule_out() -> None:
    a, b = record(step=10, sampled=4), record(step=10, loss="0x1.8p+0", sampled=4)
    note = classify(a, b)["note"]
    assert "1/4 of each per step" in note
    assert note.endswith("steps 7 to 9")
    # The optimizer's cause also covers its own step's gradients.
    assert sampling_caveat(Cause.OPTIMIZER, a, b).endswith("steps 7 to 10")  # type: ignore[union-attr]
    # The initial parameters at step 1 are whole: nothing to rule out.
    assert sampling_caveat(Cause.FORWARD, record(sampled=4), record(sampled=4)) is None
    assert sampling_caveat(Cause.INPUT, a, b) is None
    assert sampling_caveat(Cause.FORWARD, record(step=10), record(step=10)) is None


def test_differing_lists_one_sided_names_after_the_changed_ones() -> None:
    assert differing({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5, "d": 4}) == ["b", "c", "d"]
    assert differing({}, {}) == []


def test_causes_rank_by_their_place_in_the_step_with_unknown_last() -> None:
    ranks = [cause_rank(cause) for cause in ("initialization", "input", "forward", "backward",
                                              "optimizer")]
    assert ranks == sorted(ranks) == list(range(5))
    assert cause_rank(Cause.UNKNOWN) == CAUSE_ORDER.index(Cause.UNKNOWN)
    assert cause_rank(None) == len(CAUSE_ORDER) > cause_rank(Cause.UNKNOWN)
