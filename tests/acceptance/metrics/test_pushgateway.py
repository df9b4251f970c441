"""Pushes through the public code path into a real Pushgateway scraped by a real Prometheus."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helpers.metrics_servers import (
    PROMETHEUS_DIR,
    SCRAPE_SECONDS,
    Prometheus,
    Pushgateway,
    bcrypt_hash,
    free_port,
    gateway_argv,
    make_manifest,
    wait_until,
)

from repro_gate import validation
from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

REPOSITORY = "octo/vision"
# Two scrape intervals: a new group's zeroed counters are scraped before its first increment.
NEW_GROUP_WAIT = str(2 * SCRAPE_SECONDS)


def group(slot: str) -> dict[str, str]:
    return {"job": "repro-gate", "repository": REPOSITORY, "gate": "train", "runner_slot": slot}


def push_environment(url: str, slot: str | None = None) -> dict[str, str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("REPRO_GATE_", "INPUT_", "GITHUB_"))
    }
    environ.update(
        REPRO_GATE_PUSHGATEWAY_URL=url,
        GITHUB_REPOSITORY=REPOSITORY,
        REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT=NEW_GROUP_WAIT,
    )
    if slot is not None:
        environ["REPRO_GATE_RUNNER_SLOT"] = slot
    return environ


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


def cli_push(path: Path, environ: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """`repro-gate push --manifest PATH`, as a separate process."""
    return subprocess.Popen(
        [sys.executable, "-m", "repro_gate", "push", "--manifest", str(path), *extra],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=90)
    return process.returncode, out, err


def rule_expression(record: str) -> str:
    """The PromQL of one recording rule, as the runner kit ships it."""
    document = yaml.safe_load((PROMETHEUS_DIR / "recording-rules.yml").read_text("utf-8"))
    for rule_group in document["groups"]:
        for rule in rule_group["rules"]:
            if rule.get("record") == record:
                return str(rule["expr"])
    raise AssertionError(f"no recording rule {record}")


def latest_sample(prometheus: Prometheus, selector: str) -> tuple[float, float]:
    """(timestamp, value) of the newest stored sample of a one-series selector."""
    result = prometheus.query(f"{selector}[30s]")
    assert len(result) == 1, result
    stamp, value = result[0]["values"][-1]
    return float(stamp), float(value)


def test_run_counts_and_sli_are_exact_with_concurrent_gates(
    tmp_path: Path, pushgateway: Pushgateway, prometheus: Prometheus
) -> None:
    pushed: Counter[str] = Counter()
    checkpoints = Counter[str]()
    clock = datetime.now(timezone.utc) - timedelta(hours=1)

    def next_manifest(verdict: str, **options: Any) -> dict[str, Any]:
        nonlocal clock
        clock += timedelta(seconds=1)
        pushed[verdict] += 1
        if verdict != "error":
            checkpoints["compared"] += 1
            checkpoints["matched"] += int(verdict == "pass")
        return make_manifest(verdict, finished=clock, **options)

    # Two gates at the same moment on different runner slots, both creating their group.
    first = [
        cli_push(
            write_manifest(tmp_path / "a1", next_manifest("pass")),
            push_environment(pushgateway.url, "s1"),
        ),
        cli_push(
            write_manifest(tmp_path / "b1", next_manifest("fail")),
            push_environment(pushgateway.url, "s2"),
        ),
    ]
    for process in first:
        code, out, err = finish(process)
        assert code == 0, err
        assert "metrics pushed" in out

    # Several runs of one slot between two scrapes (one scrape a second).
    environ_s1 = push_environment(pushgateway.url)
    burst = [next_manifest(v, ops=2) for v in ("pass", "pass", "fail", "error", "pass")]
    for manifest in burst:
        slot_s1 = MetricsConfig(runner_slot="s1")
        section = push_manifest(manifest, slot_s1, tmp_path / "burst", environ_s1)
        assert section["pushed"] and section["counted"], section

    # Again two gates at the same moment, now on existing groups, then more runs on s2.
    second = [
        cli_push(
            write_manifest(tmp_path / "a2", next_manifest("fail")),
            push_environment(pushgateway.url, "s1"),
        ),
        cli_push(
            write_manifest(tmp_path / "b2", next_manifest("pass")),
            push_environment(pushgateway.url, "s2"),
        ),
    ]
    for process in second:
        code, _, err = finish(process)
        assert code == 0, err
    for verdict in ("pass", "pass", "error", "pass"):
        section = push_manifest(
            next_manifest(verdict), MetricsConfig(runner_slot="s2"), tmp_path / "late", environ_s1
        )
        assert section["pushed"] and section["counted"], section

    # The gateway holds the sum of everything pushed, split over the two groups.
    for verdict in ("pass", "fail", "error"):
        held = sum(
            pushgateway.value("repro_gate_runs_total", group(slot), verdict=verdict) or 0
            for slot in ("s1", "s2")
        )
        assert held == pushed[verdict]

    # Prometheus has scraped the final state.
    totals = f'sum by (verdict) (repro_gate_runs_total{{repository="{REPOSITORY}"}})'

    def scraped() -> bool:
        seen = {r["metric"]["verdict"]: float(r["value"][1]) for r in prometheus.query(totals)}
        return seen == {v: float(pushed[v]) for v in ("pass", "fail", "error")}

    wait_until(scraped, 30, "Prometheus to scrape the final counters")

    # Some scrape saw several runs of slot s1 at once (the burst landed between two scrapes).
    per_scrape: Counter[float] = Counter()
    for series in prometheus.query('repro_gate_runs_total{runner_slot="s1"}[5m]'):
        for stamp, value in series["values"]:
            per_scrape[float(stamp)] += float(value)
    totals_by_scrape = [per_scrape[stamp] for stamp in sorted(per_scrape)]
    assert max(b - a for a, b in itertools.pairwise(totals_by_scrape)) >= 2, totals_by_scrape

    # At the newest scrape, the shipped recording-rule expressions count exactly what was pushed.
    at, _ = latest_sample(prometheus, 'repro_gate_runs_total{runner_slot="s1", verdict="pass"}')
    counts = {
        r["metric"]["verdict"]: float(r["value"][1])
        for r in prometheus.query(rule_expression("repro_gate:runs:increase28d"), at=at)
    }
    assert counts == {v: float(pushed[v]) for v in ("pass", "fail", "error")}
    true_ratio = pushed["pass"] / (pushed["pass"] + pushed["fail"])
    sli = prometheus.query(rule_expression("repro_gate:reproducible_runs:ratio_28d"), at=at)
    assert [float(r["value"][1]) for r in sli] == [true_ratio]
    match = prometheus.query(rule_expression("repro_gate:checkpoint_match:ratio_28d"), at=at)
    match_ratio = checkpoints["matched"] / checkpoints["compared"]
    assert [float(r["value"][1]) for r in match] == [match_ratio]

    # The series Prometheus's rule engine recorded after that scrape is the same expression,
    # off from the exact ratio only by increase()'s extrapolation to the evaluation time.
    recorded = f'repro_gate:reproducible_runs:ratio_28d{{repository="{REPOSITORY}"}}'
    wait_until(lambda: latest_sample(prometheus, recorded)[0] > at, 15, "a rule evaluation")
    evaluated_at, value = latest_sample(prometheus, recorded)
    again = prometheus.query(
        rule_expression("repro_gate:reproducible_runs:ratio_28d"), at=evaluated_at
    )
    assert [float(r["value"][1]) for r in again] == [value]
    assert abs(value - true_ratio) < 0.05


def test_gateway_down_keeps_payload_and_push_command_delivers_later(
    tmp_path: Path, pushgateway: Pushgateway, capfd: pytest.CaptureFixture[str]
) -> None:
    environ = push_environment(pushgateway.url, "s1")
    environ["REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT"] = "0"
    start = datetime.now(timezone.utc) - timedelta(minutes=10)
    first = make_manifest("pass", finished=start)
    assert push_manifest(first, MetricsConfig(), tmp_path / "run1", environ)["pushed"]
    capfd.readouterr()

    pushgateway.stop()
    output_dir = tmp_path / "run2"
    failed = make_manifest("fail", finished=start + timedelta(minutes=1), output_dir=output_dir)
    before = json.dumps(failed, sort_keys=True)
    began = time.monotonic()
    section = push_manifest(failed, MetricsConfig(), output_dir, environ)
    took = time.monotonic() - began

    assert section["pushed"] is False
    assert section["attempts"] == 3
    assert "cannot read the gateway" in section["reason"]
    assert took < 30  # bounded retries
    assert json.dumps(failed, sort_keys=True) == before  # the verdict is untouched
    warning = capfd.readouterr().err.splitlines()
    assert len(warning) == 1
    assert warning[0].startswith("repro-gate: warning: metrics push to ")
    assert "repro-gate push --manifest" in warning[0]
    payload = (output_dir / "metrics.prom").read_text(encoding="utf-8")
    assert 'repro_gate_runs_total{verdict="fail"} 1.0' in payload
    assert 'repro_gate_runs_total{verdict="pass"} 0.0' in payload
    failed["metrics"] = section
    assert validation.errors("manifest", failed) == []
    path = write_manifest(output_dir, failed)

    code, _, err = finish(cli_push(path, environ))
    assert code == 2  # exit 1 is the verdict fail; a failed push is an error
    assert err.count("\n") == 1 and "error: metrics push" in err
    assert f"`repro-gate push --manifest {path} --pushgateway-url {pushgateway.url}`" in err

    pushgateway.start()
    # Meanwhile a newer run of the same slot was pushed.
    newer = make_manifest("pass", finished=start + timedelta(minutes=2))
    assert push_manifest(newer, MetricsConfig(), tmp_path / "run3", environ)["pushed"]

    code, out, err = finish(cli_push(path, environ))
    assert code == 0, err
    assert "late push" in out
    held = {
        verdict: pushgateway.value("repro_gate_runs_total", group("s1"), verdict=verdict)
        for verdict in ("pass", "fail", "error")
    }
    assert held == {"pass": 2.0, "fail": 1.0, "error": 0.0}
    # The late, older run did not replace the newer run's gauges.
    assert pushgateway.value("repro_gate_last_run_verdict", group("s1"), verdict="pass") == 1.0
    assert pushgateway.value("repro_gate_last_run_timestamp_seconds", group("s1")) == pytest.approx(
        (start + timedelta(minutes=2)).timestamp(), abs=1e-6
    )
    recorded = json.loads(path.read_text(encoding="utf-8"))["metrics"]
    assert recorded["pushed"] is True and recorded["counted"] is True
    assert validation.errors("metrics", recorded) == []

    # Sending it again changes nothing: the manifest says it was pushed.
    code, out, _ = finish(cli_push(path, environ))
    assert code == 0 and "already pushed" in out
    # Forcing it for the newest run of the group does not count it twice either.
    newest = write_manifest(tmp_path / "run3", newer)
    code, out, err = finish(cli_push(newest, environ, "--force"))
    assert code == 0, err
    assert "already counted" in out
    assert pushgateway.value("repro_gate_runs_total", group("s1"), verdict="pass") == 2.0
    assert pushgateway.value("repro_gate_runs_total", group("s1"), verdict="fail") == 1.0


def test_basic_auth_is_sent_and_a_rejection_is_not_retried(tmp_path: Path) -> None:
    password_hash = bcrypt_hash("s3cret")
    web_config = tmp_path / "web.yml"
    web_config.write_text(
        yaml.safe_dump({"basic_auth_users": {"gate": password_hash}}), encoding="utf-8"
    )
    port = free_port()
    storage = tmp_path / "storage"
    storage.mkdir()
    server = Pushgateway(
        argv=gateway_argv(port, storage, web_config),
        url=f"http://127.0.0.1:{port}",
        log=tmp_path / "pushgateway.log",
    )
    # /-/ready is behind the same authentication: wait for the port to answer at all.
    with server.log.open("ab") as log:
        server.process = subprocess.Popen(server.argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: requests.get(server.url + "/-/ready", timeout=2).status_code == 401,
            30,
            "the gateway to ask for credentials",
        )
        environ = push_environment(server.url, "s1")
        environ["REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT"] = "0"
        manifest = make_manifest("pass")

        refused = push_manifest(manifest, MetricsConfig(), tmp_path / "out", environ)
        assert refused["pushed"] is False
        assert refused["attempts"] == 1
        assert "401" in refused["reason"]

        environ["REPRO_GATE_PUSHGATEWAY_USERNAME"] = "gate"
        environ["REPRO_GATE_PUSHGATEWAY_PASSWORD"] = "s3cret"
        accepted = push_manifest(manifest, MetricsConfig(), tmp_path / "out", environ)
        assert accepted["pushed"] is True, accepted
        answer = requests.get(server.url + "/api/v1/metrics", auth=("gate", "s3cret"), timeout=5)
        groups = [g for g in answer.json()["data"] if g["labels"] == group("s1")]
        runs = groups[0]["repro_gate_runs_total"]["metrics"]
        values = {m["labels"]["verdict"]: m["value"] for m in runs}
        assert values == {"pass": "1", "fail": "0", "error": "0"}
    finally:
        server.stop()


def test_push_command_bad_input_exits_2(tmp_path: Path) -> None:
    code, _, err = finish(
        cli_push(tmp_path / "missing.json", push_environment("http://127.0.0.1:9"))
    )
    assert code == 2
    assert err.strip().startswith("repro-gate: error:") and "not found" in err
    assert err.count("\n") == 1

    path = write_manifest(tmp_path / "run", make_manifest("pass"))
    environ = push_environment("http://127.0.0.1:9")
    del environ["REPRO_GATE_PUSHGATEWAY_URL"]
    code, _, err = finish(cli_push(path, environ))
    assert code == 2
    assert "no pushgateway configured" in err
