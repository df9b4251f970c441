"""The cost of determinism as metric families: a ratio only when the cost was measured, the
budget and its status one-hot, and the arms' median step times."""

from __future__ import annotations

from typing import Any

from helpers.cost_manifests import cost
from prometheus_client.core import Metric

from repro_gate.publish.metrics.cost_families import (
    BUDGET_RATIO,
    BUDGET_STATUS,
    COST_INTERVAL,
    COST_RATIO,
    COST_STATUS,
    STEP_DURATION,
    cost_families,
)


def samples(families: list[Metric]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> sorted labels -> value."""
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in families:
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_no_cost_section_pushes_nothing() -> None:
    assert cost_families(None) == []


def test_a_measured_cost_pushes_its_ratio_interval_and_step_times() -> None:
    series = samples(cost_families(cost(3.0, [1.5, 4.5])))
    assert series[COST_STATUS] == {(("status", "measured"),): 1.0,
                                   (("status", "inconclusive"),): 0.0}
    assert series[COST_RATIO] == {(): 0.03}
    assert series[COST_INTERVAL] == {(("bound", "lower"),): 0.015,
                                     (("bound", "upper"),): 0.045}
    assert series[STEP_DURATION] == {(("mode", "deterministic"),): 0.0412,
                                     (("mode", "default"),): 0.04}
    assert BUDGET_RATIO not in series and BUDGET_STATUS not in series


def test_an_inconclusive_cost_pushes_its_status_and_no_ratio() -> None:
    section = cost(7.7, [-4.0, 19.4], status="inconclusive", reason="too wide")
    series = samples(cost_families(section))
    assert series[COST_STATUS][(("status", "inconclusive"),)] == 1.0
    assert COST_RATIO not in series and COST_INTERVAL not in series


def test_a_budget_pushes_its_limit_and_status() -> None:
    section = cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"})
    series = samples(cost_families(section))
    assert series[BUDGET_RATIO] == {(): 0.1}
    assert series[BUDGET_STATUS] == {(("status", "over"),): 1.0, (("status", "within"),): 0.0,
                                     (("status", "inconclusive"),): 0.0}


def test_without_step_times_there_is_no_step_family() -> None:
    section: dict[str, Any] = cost(3.0, None, det_step_seconds=None, default_step_seconds=None)
    names = [family.name for family in cost_families(section)]
    assert names == [COST_STATUS, COST_RATIO]
