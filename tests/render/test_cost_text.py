"""The cost of determinism in words: the section read tolerantly, and never a point figure the
data cannot support."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.cost_manifests import cost

from repro_gate.render import cost_text
from repro_gate.render.cost_text import BudgetStatus, CostStatus, Interval


def view(section: Any) -> cost_text.CostView:
    found = cost_text.read(section)
    assert found is not None
    return found


def test_a_missing_section_is_not_measured() -> None:
    assert cost_text.read(None) is None
    assert cost_text.read("3.1%") is None
    assert cost_text.output_pct(None) == ""
    assert cost_text.output_status(None) == ""


def test_a_measured_cost_has_its_interval_and_pairs() -> None:
    measured = view(cost(3.14, [1.2, 5.04]))
    assert measured.measured and measured.status is CostStatus.MEASURED
    assert measured.interval == Interval(1.2, 5.04)
    assert cost_text.figure(measured) == "+3.1% (95% interval +1.2% to +5.0%, 6 block pairs)"
    assert cost_text.short_figure(measured) == "+3.1% (95% interval +1.2% to +5.0%)"
    assert cost_text.output_pct(measured) == "3.14"
    assert cost_text.output_status(measured) == "measured"


def test_an_inconclusive_cost_never_shows_its_point_figure() -> None:
    reason = "the interval is too wide"
    inconclusive = view(cost(7.7, [-4.0, 19.4], status="inconclusive", reason=reason, pairs=4))
    assert not inconclusive.measured
    figure = cost_text.figure(inconclusive)
    assert figure == f"inconclusive ({reason}; 95% interval -4.0% to +19.4%, 4 block pairs)"
    assert "7.7" not in figure
    assert cost_text.short_figure(inconclusive) == "inconclusive"
    assert cost_text.output_pct(inconclusive) == ""


def test_no_interval_from_fewer_than_three_pairs_is_ever_shown() -> None:
    # An older manifest may hold one: from two pairs, t(1) = 12.7 made it meaningless.
    short = view(cost(5.0, [-100.0, 63123226.0], status="inconclusive", reason="too short",
                      pairs=2))
    assert short.interval is None
    assert cost_text.figure(short) == "inconclusive (too short; 2 block pairs)"
    assert "63123226" not in cost_text.sentence(short)
    part = view({**cost(5.0, [1.0, 9.0], pairs=6), "breakdown": {
        "fill_uninitialized_memory": {"pct": 1.0, "ci95_pct": [-90.0, 900.0], "pairs": 2}}})
    assert part.breakdown[0].interval is None
    assert cost_text.part_figure(part, part.breakdown[0]) == "inconclusive (2 block pairs)"


def test_the_renderers_minimum_of_pairs_is_the_estimates() -> None:
    from repro_gate.cost.estimate import MIN_PAIRS

    assert cost_text.MIN_PAIRS == MIN_PAIRS


def test_a_section_of_an_older_shape_reads_as_inconclusive() -> None:
    older = view({"pct": 41.7, "ci95_pct": [26.2, 56.7]})
    assert older.status is CostStatus.INCONCLUSIVE
    assert older.reason == "no status recorded"
    assert cost_text.figure(older) == (
        "inconclusive (no status recorded; 95% interval +26.2% to +56.7%)")


def test_fields_of_the_wrong_type_read_as_absent() -> None:
    odd = view({"status": "measured", "pct": "3", "ci95_pct": [1.0], "design": {"pairs": True},
                "budget": {"max_pct": 10, "status": "sideways"}, "ops": [{"name": 1}]})
    assert odd.pct is None and not odd.measured
    assert odd.interval is None and odd.pairs is None and odd.budget is None
    assert odd.ops == ()
    assert cost_text.figure(odd) == "inconclusive (the data cannot support a figure)"


@pytest.mark.parametrize(("status", "expected"), [
    ("within", "within the 10% budget"),
    ("over", "over the 10% budget: the whole interval lies above it"),
    ("inconclusive", "budget inconclusive: the interval straddles the 10% budget"),
])
def test_the_budgets_verdict_in_words(status: str, expected: str) -> None:
    measured = view(cost(9.0, [1.0, 17.0], budget={"max_pct": 10, "status": status}))
    assert cost_text.budget_text(measured) == expected
    assert cost_text.sentence(measured) == f"{cost_text.figure(measured)}; {expected}"
    assert cost_text.over_budget(measured) is (status == BudgetStatus.OVER)


def test_an_inconclusive_cost_cannot_be_judged_against_a_budget() -> None:
    inconclusive = view(cost(None, None, status="inconclusive", reason="too few pairs",
                             budget={"max_pct": 12.5, "status": "inconclusive"}))
    assert cost_text.budget_text(inconclusive) == (
        "budget inconclusive: the cost is inconclusive, so the 12.5% budget cannot be judged")


def test_the_over_budget_reason_names_figure_and_budget() -> None:
    over = view(cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"}))
    assert cost_text.over_budget_reason(over) == (
        "the cost of determinism, +14.2% (95% interval +12.0% to +16.4%, 6 block pairs), is over"
        " the 10% budget: the whole interval lies above it")
    assert cost_text.over_budget_only(
        {"verdict": "fail", "reasons": [{"code": cost_text.OVER_BUDGET_CODE}]})
    assert not cost_text.over_budget_only(
        {"verdict": "fail", "reasons": [{"code": "trajectory_diverged"}]})


def test_a_share_wider_than_the_limit_is_inconclusive() -> None:
    breakdown = {
        "fill_uninitialized_memory": {"pct": 0.4, "ci95_pct": [-0.3, 1.1], "pairs": 6},
        "deterministic_kernels": {"pct": 5.5, "ci95_pct": [-8.0, 19.0], "pairs": 6},
    }
    measured = view(cost(3.1, [1.2, 5.0], breakdown=breakdown))  # max width 20 points
    fill, kernels = measured.breakdown
    assert fill.label == "filling uninitialised memory"
    assert cost_text.part_figure(measured, fill) == (
        "+0.4% (95% interval -0.3% to +1.1%, 6 block pairs)")
    assert cost_text.part_figure(measured, kernels) == (
        "inconclusive (95% interval -8.0% to +19.0%, 6 block pairs)")
    assert cost_text.breakdown_text(measured).startswith("filling uninitialised memory +0.4%")


def test_the_ops_costing_most_come_first() -> None:
    ops = [{"name": "aten::cumsum", "det_ms": 0.9, "default_ms": 0.5},
           {"name": "aten::index_add_", "det_ms": 1.9, "default_ms": 0.3},
           {"name": "aten::mm", "det_ms": 1.0, "default_ms": 1.0}]
    measured = view(cost(3.1, [1.2, 5.0], ops=ops))
    top = cost_text.top_ops(measured, 2)
    assert [op.name for op in top] == ["aten::index_add_", "aten::cumsum"]
    assert cost_text.op_text(top[0]) == "aten::index_add_ 1.9 ms deterministic vs 0.3 ms default"


def test_step_times_in_milliseconds_with_their_block_size() -> None:
    measured = view(cost(3.0, [1.0, 5.0]))  # 0.0412 s and 0.0400 s, blocks of 4 steps
    assert cost_text.steps_text(measured) == (
        "step 41.2 ms deterministic vs 40.0 ms default (medians over blocks of 4 steps)")
    fast = view(cost(3.0, [1.0, 5.0], det_step_seconds=0.0004, default_step_seconds=0.0003))
    assert cost_text.steps_text(fast).startswith("step 0.400 ms deterministic vs 0.300 ms")
    one_arm = view(cost(3.0, [1.0, 5.0], default_step_seconds=None))
    assert cost_text.steps_text(one_arm) == ""
