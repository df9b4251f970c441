"""Per-step trajectories compared step by step: the first divergent step with its parameters and
cause, the statuses of trajectories that are missing or of other lengths, and the model's output
digest (a changed output is a forward divergence even when the loss's bits are equal; records
without it, written by earlier probes, read as before)."""

from __future__ import annotations

from typing import Any

from repro_gate.compare.trajectory import compare_ranks, compare_trajectories, divergence_order


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


def test_equal_trajectories_are_equal_and_count_their_steps() -> None:
    a = [record(1), record(2), record(3)]
    result = compare_trajectories(a, [dict(r) for r in a], ("det-1", "det-2"))
    assert result == {"steps_compared": 3, "status": "equal",
                      "steps": {"det-1": 3, "det-2": 3}, "first_divergence": None}


def test_no_steps_on_either_side_is_not_recorded() -> None:
    assert compare_trajectories([], [], ("A", "B"))["status"] == "not_recorded"
    assert compare_ranks({}, {}, ("A", "B"))["status"] == "not_recorded"


def test_a_shorter_trajectory_is_compared_as_far_as_it_goes() -> None:
    result = compare_trajectories([record(1), record(2), record(3)], [record(1), record(2)],
                                  ("A", "B"))
    assert (result["status"], result["steps_compared"], result["steps"]) == (
        "length_differs", 2, {"A": 3, "B": 2})


def test_the_divergence_names_the_step_the_parameters_and_the_runs() -> None:
    a = [{"step": 1, "loss": "0x1p+0", "params": {"w": "1", "b": "2", "c": "3"}}]
    b = [{"step": 1, "loss": "0x1p+0", "params": {"c": "x", "w": "1", "b": "y"}}]
    result = compare_trajectories(a, b, ("A", "B"), rank=2)
    divergence = result["first_divergence"]
    assert result["status"] == "different"
    # In run A's (the model's) order; the loss equal, not missing.
    assert (divergence["parameters"], divergence["loss_differs"]) == (["b", "c"], False)
    assert (divergence["rank"], divergence["runs"], divergence["cause"]) == (
        2, ["A", "B"], "unknown")
    assert "initial parameters were not recorded" in divergence["note"]


def test_an_unrecorded_loss_is_neither_equal_nor_different() -> None:
    a = [{"step": 1, "params": {"w": "1"}}]
    b = [{"step": 1, "params": {"w": "2"}}]
    assert compare_trajectories(a, b, ("A", "B"))["first_divergence"]["loss_differs"] is None


def test_divergences_order_by_step_then_cause_then_rank() -> None:
    input_rank_1 = {"step": 4, "cause": "input", "rank": 1}
    backward_rank_0 = {"step": 4, "cause": "backward", "rank": 0}
    earlier = {"step": 3, "cause": "unknown", "rank": 5}
    ordered = sorted([backward_rank_0, input_rank_1, earlier], key=divergence_order)
    assert ordered == [earlier, input_rank_1, backward_rank_0]

