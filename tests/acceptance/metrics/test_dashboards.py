"""The provisioned Grafana dashboards: strict structure, and every query run on a real Prometheus.

No Grafana server is installable here (not in the Debian, PyPI or npm registries), so the
dashboards are checked the way Grafana would read them: valid JSON with the provisioned
datasource uid everywhere, a sound grid, and PromQL that Prometheus parses and answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helpers.metrics_servers import (
    GRAFANA_DIR,
    PROMETHEUS_DIR,
    Prometheus,
    Pushgateway,
    make_manifest,
    wait_until,
)
from prometheus_client import generate_latest

from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest
from repro_gate.publish.metrics.pushgateway import keep_payload
from repro_gate.runner.metrics import (
    JobOutcome,
    MetricsServer,
    RegistrationFailure,
    ServiceMetrics,
    SlotState,
    serve_metrics,
)
from repro_gate.runner.slots import Slot

DASHBOARDS = {
    "executive": GRAFANA_DIR / "dashboards" / "executive.json",
    "on-call": GRAFANA_DIR / "dashboards" / "on-call.json",
    "debug": GRAFANA_DIR / "dashboards" / "debug.json",
}
PANEL_TYPES = {"stat", "timeseries", "table", "bargauge"}
ROW = "row"  # a row header: no query; the panels below it, up to the next row, are its own
RUNNER_JOB = "repro-gate-runner"  # prometheus.yml's scrape job of the runner service
# Grafana's variables, replaced by values Prometheus accepts.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "$repository": ".*",
    "$gate": ".*",
    "$runner_slot": ".*",
    "$pool": ".*",
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
        (panel["title"], target)
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
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
        assert panel["type"] in PANEL_TYPES | {ROW}
        assert panel["title"] and panel["description"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"panel {panel['title']} overlaps another"
        occupied |= cells
        if panel["type"] == ROW:
            # Expanded rows keep their panels at the top level, below the row's header.
            assert grid["w"] == 24 and grid["h"] == 1 and grid["x"] == 0
            assert panel["collapsed"] is False and panel["panels"] == []
            assert "targets" not in panel
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": uid}
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
    runner_row = [p for p in load(DASHBOARDS["on-call"])["panels"] if p["type"] == ROW]
    assert [row["title"] for row in runner_row] == ["Runner service"]
    for needle in (
        "repro_gate_runner_slots",
        "repro_gate_runner_jobs_started_total",
        "repro_gate_runner_jobs_finished_total",
        "histogram_quantile(0.5, sum by (le, pool) (rate(repro_gate_runner_job_duration",
        "histogram_quantile(0.95, sum by (le, pool) (rate(repro_gate_runner_job_duration",
        "repro_gate_runner_registration_failures_total",
        "repro_gate_runner_health_refusals_total",
    ):
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
    pushed |= runner_metric_names()
    for path in DASHBOARDS.values():
        text = path.read_text(encoding="utf-8")
        assert set(re.findall(r"repro_gate:[a-z0-9_:]+", text)) <= recorded, path.name
        assert set(re.findall(r"\brepro_gate_[a-z_]+", text)) <= pushed, path.name


def runner_metrics() -> ServiceMetrics:
    """The runner service's metrics after a job, a refusal and a failed registration."""
    metrics = ServiceMetrics("lab")
    slot = Slot(0, "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b", "NVIDIA H100 80GB HBM3")
    metrics.set_state(slot, SlotState.REGISTERING)
    metrics.registration_failed(slot, RegistrationFailure.REFUSED)
    metrics.set_state(slot, SlotState.BUSY)
    metrics.job_started(slot)
    metrics.job_finished(slot, JobOutcome.COMPLETED, 600.0)
    metrics.health_refused(slot)
    metrics.job_finished(slot, JobOutcome.REFUSED, 2.0)
    metrics.set_state(slot, SlotState.IDLE)
    return metrics


def runner_metric_names() -> set[str]:
    """Every repro_gate_ name the runner service's /metrics exposes."""
    text = generate_latest(runner_metrics().registry).decode("utf-8")
    return set(re.findall(r"^(repro_gate_[a-z_]+)", text, flags=re.MULTILINE))


def scrape_runner(prometheus: Prometheus, port: int) -> None:
    """Point prometheus.yml's runner job at a real /metrics endpoint, and reload."""
    (flag,) = [arg for arg in prometheus.argv if arg.startswith("--config.file=")]
    path = Path(flag.split("=", 1)[1])
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == RUNNER_JOB]
    job["scrape_interval"] = config["global"]["scrape_interval"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{port}"]}]
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    requests.post(prometheus.url + "/-/reload", timeout=10).raise_for_status()


@pytest.fixture
def runner_endpoint() -> Iterator[MetricsServer]:
    """A real runner service /metrics endpoint."""
    server = serve_metrics("127.0.0.1:0", runner_metrics().registry)
    yield server
    server.close()


@pytest.mark.prometheus
@pytest.mark.slow
def test_every_query_runs_on_prometheus(
    tmp_path: Path, pushgateway: Pushgateway, prometheus: Prometheus,
    runner_endpoint: MetricsServer,
) -> None:
    environ = {
        "REPRO_GATE_PUSHGATEWAY_URL": pushgateway.url,
        "GITHUB_REPOSITORY": "octo/vision",
        "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": "2",
    }
    scrape_runner(prometheus, runner_endpoint.port)
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
