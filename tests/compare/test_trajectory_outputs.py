"""The model's output digest in a step record: a changed output is a forward divergence even when
the loss's bits are equal; records without it (written by earlier probes) read as before."""

from __future__ import annotations

from typing import Any

from repro_gate.compare.trajectory import compare_trajectories


def record(step: int, *, w: str = "w", grad: str = "g", **fields: Any) -> dict[str, Any]:
    base = {"step": step, "loss": "0x1.8p+0", "inputs": "i", "params": {"w": w},
            "grads": {"w": grad}}
    if step == 1:
        base["init"] = {"w": "w0"}
    return {**base, **fields}


def first_divergence(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    result = compare_trajectories(a, b, ("A", "B"))
    assert result["status"] == "different"
    return dict(result["first_divergence"])


def test_an_output_that_changed_while_the_loss_bits_did_not_is_the_forward_pass() -> None:
    a = [record(1, outputs="o1"), record(2, outputs="o2")]
    b = [record(1, outputs="o1"), record(2, outputs="o2'", w="w'", grad="g'")]
    divergence = first_divergence(a, b)
    assert (divergence["step"], divergence["cause"], divergence["loss_differs"]) == (
        2, "forward", False)
    assert "gradients" not in divergence


def test_equal_outputs_and_different_gradients_are_the_backward_pass() -> None:
    a = [record(1, outputs="o1")]
    b = [record(1, outputs="o1", w="w'", grad="g'")]
    divergence = first_divergence(a, b)
    assert (divergence["cause"], divergence["gradients"]) == ("backward", ["w"])


def test_records_without_outputs_are_read_as_before() -> None:
    # An earlier probe's records, on one side or both: the outputs are not compared.
    old = [record(1, w="w'", grad="g'")]
    for a in ([record(1)], [record(1, outputs="o1")]):
        divergence = first_divergence(a, old)
        assert (divergence["cause"], divergence["gradients"]) == ("backward", ["w"])
    assert compare_trajectories([record(1)], [record(1, outputs="o1")], ("A", "B"))[
        "status"] == "equal"
