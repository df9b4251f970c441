"""The cost of determinism in the pushed metrics: the ratio only when measured, its status, the
budget, and the runs that failed on the budget alone (reproducible, so good for the SLO).

The manifests are judged by the gate's own verdict functions and valid against the schema
(tests/helpers/cost_manifests.py); the payload is what a push sends (`metrics.prom`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from helpers.cost_manifests import cost, gate_manifest
from helpers.metrics_servers import (
    PROMETHEUS_DIR,
    SCRAPE_SECONDS,
    Prometheus,
    Pushgateway,
    wait_until,
)
from prometheus_client.exposition import push_to_gateway
from prometheus_client.parser import text_string_to_metric_families

from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest, sli
from repro_gate.publish.metrics.pushgateway import keep_payload

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]
OVER = {"max_pct": 10.0, "status": "over"}


def payload(manifest: dict, tmp_path: Path) -> Series:
    series: Series = {}
    text = keep_payload(manifest, tmp_path).read_text(encoding="utf-8")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return series


def test_a_measured_cost_pushes_its_ratio_interval_and_budget(tmp_path: Path) -> None:
    section = cost(3.1, [1.2, 5.0], budget={"max_pct": 10.0, "status": "within"})
    series = payload(gate_manifest(section, reproducible=True), tmp_path)

    assert series["repro_gate_determinism_cost_ratio"] == {(): 0.031}
    assert series["repro_gate_determinism_cost_ci95_ratio"] == {
        (("bound", "lower"),): 0.012, (("bound", "upper"),): 0.05,
    }
    assert series["repro_gate_determinism_cost_status"] == {
        (("status", "measured"),): 1.0, (("status", "inconclusive"),): 0.0,
    }
    assert series["repro_gate_determinism_cost_budget_ratio"] == {(): 0.1}
    assert series["repro_gate_determinism_cost_budget_status"] == {
        (("status", "over"),): 0.0, (("status", "within"),): 1.0,
        (("status", "inconclusive"),): 0.0,
    }
    assert series["repro_gate_cost_budget_failures_total"] == {(): 0.0}
    assert series["repro_gate_run_duration_seconds"] == {
        (("mode", "deterministic"),): (152.4 + 19.8) / 2, (("mode", "cost"),): 141.9,
    }


def test_an_inconclusive_cost_pushes_its_status_and_no_figure(tmp_path: Path) -> None:
    section = cost(7.7, [-4.0, 19.4], status="inconclusive", reason="too wide", pairs=4)
    series = payload(gate_manifest(section, reproducible=True), tmp_path)

    assert "repro_gate_determinism_cost_ratio" not in series
    assert "repro_gate_determinism_cost_ci95_ratio" not in series
    assert "repro_gate_determinism_cost_budget_status" not in series  # no budget set
    assert series["repro_gate_determinism_cost_status"] == {
        (("status", "measured"),): 0.0, (("status", "inconclusive"),): 1.0,
    }
    assert series["repro_gate_step_duration_seconds"] == {
        (("mode", "deterministic"),): 0.0412, (("mode", "default"),): 0.04,
    }


def test_a_gate_over_budget_alone_is_counted_as_such(tmp_path: Path) -> None:
    series = payload(gate_manifest(cost(14.2, [12.0, 16.4], budget=OVER), reproducible=True),
                     tmp_path)

    assert series["repro_gate_runs_total"][(("verdict", "fail"),)] == 1.0
    assert series["repro_gate_cost_budget_failures_total"] == {(): 1.0}
    assert series["repro_gate_determinism_cost_budget_status"][(("status", "over"),)] == 1.0


def test_a_gate_not_reproducible_and_over_budget_is_a_reproducibility_failure(
    tmp_path: Path,
) -> None:
    series = payload(gate_manifest(cost(14.2, [12.0, 16.4], budget=OVER), reproducible=False),
                     tmp_path)

    assert series["repro_gate_runs_total"][(("verdict", "fail"),)] == 1.0
    assert series["repro_gate_cost_budget_failures_total"] == {(): 0.0}


def test_no_cost_no_cost_metrics(tmp_path: Path) -> None:
    series = payload(gate_manifest(None, reproducible=True), tmp_path)

    assert not [name for name in series if name.startswith("repro_gate_determinism_cost")]


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_budget_failure_is_a_reproducible_run_for_the_sli(
    tmp_path: Path, pushgateway: Pushgateway, prometheus: Prometheus
) -> None:
    """Even in a group an older gate created, without the budget counter: the push seeds it at 0
    before its first increment, so `increase()` sees that increment."""
    labels = {"repository": "octo/vision", "gate": "repro-gate", "runner_slot": "s1"}
    older = sli.counter_families(sli.GroupState(), None)
    older = [family for family in older if family.name != sli.COST_BUDGET_FAILURES]
    push_to_gateway(pushgateway.url, job="repro-gate", registry=sli.registry(older),
                    grouping_key=labels)
    wait_until(lambda: prometheus.query("repro_gate_runs_total"), 30, "a scrape of the group")
    environ = {"REPRO_GATE_PUSHGATEWAY_URL": pushgateway.url, "GITHUB_REPOSITORY": "octo/vision",
               "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": str(2 * SCRAPE_SECONDS)}
    now = datetime.now(timezone.utc)
    over = gate_manifest(cost(14.2, [12.0, 16.4], budget=OVER), reproducible=True)
    passing = gate_manifest(cost(3.1, [1.2, 5.0]), reproducible=True)
    for offset, manifest in ((2, over), (1, passing)):
        manifest["finished_at"] = (now - timedelta(seconds=offset)).isoformat()
        section = push_manifest(manifest, MetricsConfig(runner_slot="s1"), tmp_path, environ)
        assert section["pushed"] and section["counted"], section

    # One pass and one fail on the budget alone: every valid run was reproducible. Evaluated at
    # the newest scrape, where increase() does not extrapolate.
    scraped = ('sum(repro_gate_runs_total{verdict="pass"})'
               " + sum(repro_gate_cost_budget_failures_total)")
    wait_until(lambda: [r for r in prometheus.query(scraped) if float(r["value"][1]) == 2.0], 30,
               "a scrape of both runs")
    newest = prometheus.query('repro_gate_runs_total{verdict="pass"}[30s]')[0]["values"][-1][0]
    ratio = prometheus.query(_rule("repro_gate:reproducible_runs:ratio_28d"), at=float(newest))
    fails = prometheus.query(_rule("repro_gate:runs:increase28d"), at=float(newest))
    assert [float(r["value"][1]) for r in ratio] == [1.0]
    assert {r["metric"]["verdict"]: float(r["value"][1]) for r in fails} == {
        "pass": 1.0, "fail": 1.0, "error": 0.0,
    }


def _rule(record: str) -> str:
    document = yaml.safe_load((PROMETHEUS_DIR / "recording-rules.yml").read_text("utf-8"))
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    return next(str(rule["expr"]) for rule in rules if rule.get("record") == record)
