"""The cost of determinism as metric families: the figure only when it was measured.

An inconclusive cost pushes its status and no ratio, so the group's ratio series goes stale
(the push replaces the group) and the daily average is taken over measured runs only, never over
a figure the data could not support.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from repro_gate.render import cost_text

COST_RATIO = "repro_gate_determinism_cost_ratio"
COST_INTERVAL = "repro_gate_determinism_cost_ci95_ratio"
COST_STATUS = "repro_gate_determinism_cost_status"
BUDGET_RATIO = "repro_gate_determinism_cost_budget_ratio"
BUDGET_STATUS = "repro_gate_determinism_cost_budget_status"
STEP_DURATION = "repro_gate_step_duration_seconds"


def cost_families(cost: Any) -> list[Metric]:
    """Status, figure and interval (measured only), budget, and the arms' median step times."""
    view = cost_text.read(cost)
    if view is None:
        return []
    families: list[Metric] = [_one_hot(
        COST_STATUS,
        "1 for the status of the last run's cost of determinism (measured, inconclusive), 0 for"
        " the other.",
        [status.value for status in cost_text.CostStatus], view.status.value,
    )]
    if view.measured and view.pct is not None:
        families.append(GaugeMetricFamily(
            COST_RATIO,
            "Extra step time of deterministic mode over default mode (0.25: 25% slower);"
            " only when measured.",
            value=view.pct / 100.0,
        ))
        if view.interval is not None:
            interval = GaugeMetricFamily(
                COST_INTERVAL, "95% interval of the cost ratio, by bound.", labels=["bound"]
            )
            interval.add_metric(["lower"], view.interval.low / 100.0)
            interval.add_metric(["upper"], view.interval.high / 100.0)
            families.append(interval)
    if view.budget is not None:
        families.append(GaugeMetricFamily(
            BUDGET_RATIO, "The cost budget, cost.max_pct / 100.", value=view.budget.max_pct / 100.0
        ))
        families.append(_one_hot(
            BUDGET_STATUS,
            "1 for the last run's budget status (over, within, inconclusive), 0 for the others.",
            [status.value for status in cost_text.BudgetStatus], view.budget.status.value,
        ))
    steps = _step_durations(view)
    return families + ([steps] if steps.samples else [])


def _step_durations(view: cost_text.CostView) -> GaugeMetricFamily:
    steps = GaugeMetricFamily(
        STEP_DURATION, "Median optimizer step time, by mode.", labels=["mode"]
    )
    for mode, seconds in (("deterministic", view.det_step_seconds),
                          ("default", view.default_step_seconds)):
        if seconds is not None:
            steps.add_metric([mode], seconds)
    return steps


def _one_hot(name: str, documentation: str, values: list[str], current: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["status"])
    for value in values:
        family.add_metric([value], float(value == current))
    return family
