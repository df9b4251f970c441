"""The provisioned Grafana dashboards: strict structure, and every query run on a real Prometheus.

No Grafana server is installable here (not in the Debian, PyPI or npm registries), so the
dashboards are checked the way Grafana would read them: valid JSON with the provisioned
datasource uid everywhere, a sound grid, and PromQL that Prometheus parses and answers.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from metrics_servers import (
    GRAFANA_DIR,
    PROMETHEUS_DIR,
    Prometheus,
    Pushgateway,
    make_manifest,
    wait_until,
)

from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest
from repro_gate.publish.metrics.push import keep_payload

DASHBOARDS = {
    "executive": GRAFANA_DIR / "dashboards" / "executive.json",
    "on-call": GRAFANA_DIR / "dashboards" / "on-call.json",
    "debug": GRAFANA_DIR / "dashboards" / "debug.json",
}
PANEL_TYPES = {"stat", "timeseries", "table", "bargauge"}
# Grafana's variables, replaced by values Prometheus accepts.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "$repository": ".*",
    "$gate": ".*",
    "$runner_slot": ".*",
}
# Queries that legitimately answer nothing right after two healthy pushes.
EMPTY_NOW = {
    "Firing repro-gate alerts",
    "Failed pushes",
    "Step time and its spread by mode",
}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def datasource_uid() -> str:
    document = yaml.safe_load(
        (GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text("utf-8")
    )
    sources = document["datasources"]
    assert document["apiVersion"] == 1 and len(sources) == 1
    assert sources[0]["type"] == "prometheus"
    return str(sources[0]["uid"])


def substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr.replace("{{", ""), f"unknown variable in {expr}"
    return expr


def variable_query(variable: dict[str, Any]) -> str:
    """`label_values(metric, label)` as the PromQL Grafana runs for it."""
    text = variable["query"]["query"]
    match = re.fullmatch(r"label_values\((.+), *([a-z_]+)\)", text)
    assert match, f"variable {variable['name']}: {text}"
    return f"count by ({match.group(2)}) ({match.group(1)})"


def targets(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (panel["title"], target) for panel in dashboard["panels"] for target in panel["targets"]
    ]


def test_provisioning_files() -> None:
    uid = datasource_uid()
    assert uid == "repro-gate-prometheus"
    provider = yaml.safe_load(
        (GRAFANA_DIR / "provisioning" / "dashboards" / "repro-gate.yml").read_text("utf-8")
    )
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"]


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_structure(name: str) -> None:
    dashboard = load(DASHBOARDS[name])
    uid = datasource_uid()
    assert dashboard["uid"] == f"repro-gate-{name}"
    assert dashboard["title"].startswith("repro-gate: ")
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES
        assert panel["title"] and panel["description"]
        assert panel["datasource"] == {"type": "prometheus", "uid": uid}
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"panel {panel['title']} overlaps another"
        occupied |= cells
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": uid}
            assert target["expr"].strip()
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"] == {"type": "prometheus", "uid": uid}


def test_dashboards_cover_their_audiences() -> None:
    text = {name: DASHBOARDS[name].read_text(encoding="utf-8") for name in DASHBOARDS}
    for needle in ("reproducible_runs:ratio_28d", "slo_objective", "error_budget", "cost"):
        assert needle in text["executive"]
    for needle in ("last_run_verdict", "nondeterministic_ops", "push_time_seconds", "ALERTS"):
        assert needle in text["on-call"]
    for needle in ("max_abs_divergence", "run_duration_seconds", "environment_info", "mode"):
        assert needle in text["debug"]


def test_dashboards_use_only_recorded_rules_and_pushed_metrics(tmp_path: Path) -> None:
    recorded = {
        rule["record"]
        for group in yaml.safe_load((PROMETHEUS_DIR / "recording-rules.yml").read_text("utf-8"))[
            "groups"
        ]
        for rule in group["rules"]
        if "record" in rule
    }
    payload = keep_payload(make_manifest("fail", ops=1), tmp_path).read_text(encoding="utf-8")
    pushed = set(re.findall(r"^(repro_gate_[a-z_]+)", payload, flags=re.MULTILINE))
    pushed.add("repro_gate_step_duration_stddev_seconds")  # only with trajectories in run dirs
    for path in DASHBOARDS.values():
        text = path.read_text(encoding="utf-8")
        assert set(re.findall(r"repro_gate:[a-z0-9_:]+", text)) <= recorded, path.name
        assert set(re.findall(r"\brepro_gate_[a-z_]+", text)) <= pushed, path.name


@pytest.mark.prometheus
@pytest.mark.slow
def test_every_query_runs_on_prometheus(
    tmp_path: Path, pushgateway: Pushgateway, prometheus: Prometheus
) -> None:
    environ = {
        "REPRO_GATE_PUSHGATEWAY_URL": pushgateway.url,
        "GITHUB_REPOSITORY": "octo/vision",
        "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": "2",
    }
    now = datetime.now(timezone.utc)
    for offset, verdict in ((2, "pass"), (1, "fail")):
        manifest = make_manifest(verdict, finished=now - timedelta(seconds=offset), ops=2)
        assert push_manifest(manifest, MetricsConfig(runner_slot="s1"), tmp_path, environ)["pushed"]

    def unanswered() -> list[str]:
        # Every query must parse and run; all but EMPTY_NOW must answer with data.
        missing = []
        for name, path in DASHBOARDS.items():
            dashboard = load(path)
            for variable in dashboard["templating"]["list"]:
                if not prometheus.query(substitute(variable_query(variable))):
                    missing.append(f"{name}: variable {variable['name']}")
            for title, target in targets(dashboard):
                answer = prometheus.query(substitute(target["expr"]))
                if not answer and title not in EMPTY_NOW:
                    missing.append(f"{name}: {title}: {target['expr']}")
        return missing

    # Recording rules need a scrape and an evaluation after the pushes: poll, then report.
    try:
        wait_until(lambda: unanswered() == [], 30, "every dashboard query to answer")
    except AssertionError:
        assert unanswered() == []
