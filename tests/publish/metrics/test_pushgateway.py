"""Pushing a run's metrics: the push target and its bounded grouping key, the group read back
from the gateway, how a run is added to the group's counters, and a failed push kept for later.

The gateway is a small stand-in on a loopback port that answers `GET /api/v1/metrics` from a
list of groups and records each `PUT`; no real Pushgateway runs here."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers.metrics_servers import make_manifest
from prometheus_client.parser import text_string_to_metric_families

from repro_gate.config import MetricsConfig
from repro_gate.errors import PushError
from repro_gate.publish.deadline import Deadline
from repro_gate.publish.metrics import sli
from repro_gate.publish.metrics.pushgateway import (
    Target,
    failure_line,
    push_manifest,
    push_once,
    read_group,
    resolve_target,
    retry_command,
)

FINISHED = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
GROUPING = {"repository": "octo-org/trainer", "gate": "train", "runner_slot": "gpu-1"}


class TinyGateway:
    """Answers the metrics API from `groups` (or with `status` and `raw`); records PUTs."""

    def __init__(self) -> None:
        self.groups: list[dict[str, Any]] = []
        self.status = 200
        self.raw: bytes | None = None
        self.puts: list[tuple[str, str]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = gateway.raw if gateway.raw is not None else json.dumps(
                    {"status": "success", "data": gateway.groups}).encode()
                self._answer(gateway.status, body)

            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                gateway.puts.append((self.path, self.rfile.read(length).decode()))
                self._answer(200, b"")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def group(self, **series: tuple[str, dict[str, str], float]) -> None:
        """One group of this test's target, its series given as name=(exposed, labels, value)."""
        families: dict[str, Any] = {"labels": {"job": "repro-gate", **GROUPING}}
        for exposed, labels, value in series.values():
            family = families.setdefault(exposed, {"help": exposed, "metrics": []})
            family["metrics"].append({"labels": {"job": "repro-gate", "instance": "", **GROUPING,
                                                 **labels}, "value": str(value)})
        self.groups.append(families)


@pytest.fixture
def gateway() -> Iterator[TinyGateway]:
    server = TinyGateway()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def target(url: str) -> Target:
    return Target(url=url, job="repro-gate", grouping_key=dict(GROUPING), new_group_wait=0.0)


def pushed(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The series of one PUT: (sample name, sorted labels) -> value."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(body) for sample in family.samples}


def runs(series: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    return {labels[0][1]: value for (name, labels), value in series.items()
            if name == "repro_gate_runs_total"}


def test_the_target_comes_from_the_environment_with_a_bounded_grouping_key() -> None:
    environ = {"REPRO_GATE_PUSHGATEWAY_URL": "gw.example:9091/",
               "GITHUB_REPOSITORY": "octo-org/trainer", "REPRO_GATE_RUNNER_SLOT": "gpu-1",
               "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": "-5"}
    found = resolve_target(make_manifest("pass", gate="train"), MetricsConfig(), environ)
    assert found is not None
    assert found.url == "http://gw.example:9091"
    assert found.labels == {"job": "repro-gate", **GROUPING}
    assert found.new_group_wait == 0.0
    local = resolve_target({}, MetricsConfig(pushgateway_url="http://gw:9091"), {})
    assert local is not None
    assert local.grouping_key == {"repository": "local", "gate": "default",
                                  "runner_slot": local.grouping_key["runner_slot"]}
    assert resolve_target({}, MetricsConfig(), {}) is None


def test_a_wait_that_is_not_a_number_is_refused() -> None:
    environ = {"REPRO_GATE_PUSHGATEWAY_URL": "http://gw:9091",
               "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": "soon"}
    with pytest.raises(ValueError, match="REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT must be a number"):
        resolve_target({}, MetricsConfig(), environ)


def test_the_retry_command_and_the_failure_line_carry_no_credentials(tmp_path: Path) -> None:
    secret = Target(url="https://user:pw@gw.example/pg", job="repro-gate", grouping_key={})
    command = retry_command(tmp_path / "manifest.json", secret)
    assert command == (f"repro-gate push --manifest {tmp_path / 'manifest.json'}"
                       " --pushgateway-url https://gw.example/pg")
    section = {"url": secret.display_url, "attempts": 2, "reason": "HTTP 503",
               "payload": "out/metrics.prom", "retry": command}
    assert failure_line(section) == (
        "metrics push to https://gw.example/pg failed after 2 attempt(s): HTTP 503; payload"
        f" kept in out/metrics.prom; send it later with `{command}`")
    assert "pw" not in failure_line(section)


def test_the_group_is_read_without_its_grouping_labels(gateway: TinyGateway) -> None:
    gateway.group(passed=("repro_gate_runs_total", {"verdict": "pass"}, 4),
                  last=(sli.LAST_RUN, {}, 1700000000))
    state = read_group(target(gateway.url), Deadline(5))
    assert state is not None
    assert state.get("repro_gate_runs_total", verdict="pass") == 4.0
    assert state.get(sli.LAST_RUN) == 1700000000.0
    assert state.helps[sli.LAST_RUN] == sli.LAST_RUN
    gateway.groups[0]["labels"]["gate"] = "other"
    assert read_group(target(gateway.url), Deadline(5)) is None


@pytest.mark.parametrize(("status", "raw", "retry", "message"), [
    (503, None, True, "reading the gateway answered HTTP 503"),
    (401, None, False, "reading the gateway answered HTTP 401"),
    (200, b"<html>", True, "the gateway's /api/v1/metrics is not a Pushgateway answer"),
])
def test_a_bad_answer_is_a_push_error_that_says_whether_to_retry(
    gateway: TinyGateway, status: int, raw: bytes | None, retry: bool, message: str,
) -> None:
    gateway.status, gateway.raw = status, raw
    with pytest.raises(PushError, match=message) as caught:
        read_group(target(gateway.url), Deadline(5))
    assert caught.value.retry is retry


def test_a_new_group_is_zeroed_first_then_counted(gateway: TinyGateway) -> None:
    manifest = make_manifest("fail", finished=FINISHED)
    outcome = push_once(manifest, target(gateway.url), Deadline(10))
    assert (outcome.counted, outcome.note) == (True, "counted")
    assert [path for path, _ in gateway.puts] == [gateway.puts[0][0]] * 2
    assert gateway.puts[0][0].startswith("/metrics/job/repro-gate/")
    zeroed, counted = (pushed(body) for _, body in gateway.puts)
    assert runs(zeroed) == {"pass": 0.0, "fail": 0.0, "error": 0.0}
    assert runs(counted) == {"pass": 0.0, "fail": 1.0, "error": 0.0}
    assert counted[(sli.LAST_RUN, ())] == FINISHED.timestamp()


def test_a_run_is_added_to_the_groups_counters(gateway: TinyGateway) -> None:
    earlier = (FINISHED - timedelta(hours=1)).timestamp()
    gateway.group(passed=("repro_gate_runs_total", {"verdict": "pass"}, 4),
                  failed=("repro_gate_runs_total", {"verdict": "fail"}, 1),
                  last=(sli.LAST_RUN, {}, earlier))
    outcome = push_once(make_manifest("pass", finished=FINISHED), target(gateway.url),
                        Deadline(10))
    assert outcome.note == "counted"
    (only,) = gateway.puts
    assert runs(pushed(only[1])) == {"pass": 5.0, "fail": 1.0, "error": 0.0}


def test_a_run_already_in_the_group_is_not_counted_twice(gateway: TinyGateway) -> None:
    gateway.group(passed=("repro_gate_runs_total", {"verdict": "pass"}, 4),
                  last=(sli.LAST_RUN, {}, FINISHED.timestamp()))
    outcome = push_once(make_manifest("pass", finished=FINISHED), target(gateway.url),
                        Deadline(10))
    assert outcome.note == "this run was already counted"
    assert runs(pushed(gateway.puts[0][1]))["pass"] == 4.0


def test_a_late_push_is_counted_but_keeps_the_newer_runs_gauges(gateway: TinyGateway) -> None:
    newer = (FINISHED + timedelta(hours=1)).timestamp()
    gateway.group(passed=("repro_gate_runs_total", {"verdict": "pass"}, 4),
                  last=(sli.LAST_RUN, {}, newer))
    outcome = push_once(make_manifest("pass", finished=FINISHED), target(gateway.url),
                        Deadline(10))
    assert outcome.note == "late push: counted, newer gauges kept"
    series = pushed(gateway.puts[0][1])
    assert runs(series)["pass"] == 5.0
    assert series[(sli.LAST_RUN, ())] == newer


def test_a_gateway_that_cannot_be_reached_keeps_the_payload_and_the_retry(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = MetricsConfig(pushgateway_url=f"http://127.0.0.1:{port}", timeout=0.5)
    section = push_manifest(make_manifest("pass"), settings, tmp_path, {}, warn=False)
    assert section["pushed"] is False and section["attempts"] == 1
    assert section["reason"].startswith("cannot read the gateway: ")
    assert section["payload"] == str(tmp_path / "metrics.prom")
    assert (tmp_path / "metrics.prom").is_file()
    assert section["retry"] == (f"repro-gate push --manifest {tmp_path / 'manifest.json'}"
                                f" --pushgateway-url http://127.0.0.1:{port}")
