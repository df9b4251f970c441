"""`runner audit`'s view of an endpoint: who refused (the filter or the engine) read from each
answer, an endpoint that is not there, and raw exchanges with the real proxy in front of no
engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro_gate.runner.audit.engine import Answer, Blocked, Engine, Outcome, exchange
from repro_gate.runner.audit.steps import Context


@pytest.mark.parametrize(("answer", "outcome", "detail"), [
    (Answer(0, False, b""), Outcome.REFUSED_BY_FILTER, "create: the endpoint closed, no answer"),
    (Answer(403, True, b'{"message": "authorization denied by plugin"}'),
     Outcome.REFUSED_BY_FILTER, "create: 403 authorization denied by plugin"),
    (Answer(502, False, b'{"message": "repro-gate docker proxy: cannot reach"}'),
     Outcome.REFUSED_BY_FILTER, "create: 502 repro-gate docker proxy: cannot reach"),
    (Answer(400, True, b'{"message": "repro-gate docker proxy: malformed"}'),
     Outcome.REFUSED_BY_FILTER, "create: 400 repro-gate docker proxy: malformed"),
    (Answer(500, True, b'{"message": "error mounting:\\n  permission denied"}'),
     Outcome.STOPPED_BY_ENGINE, "create: 500 error mounting: permission denied"),
    (Answer(409, True, b"Conflict. The name is already in use"),
     Outcome.STOPPED_BY_ENGINE, "create: 409 Conflict. The name is already in use"),
    (Answer(500, True, b""), Outcome.STOPPED_BY_ENGINE, "create: 500 HTTP 500"),
])
def test_a_failed_answer_says_who_refused(answer: Answer, outcome: Outcome, detail: str) -> None:
    finding = answer.finding("create")

    assert (finding.outcome, finding.detail) == (outcome, detail)
    assert not answer.ok


def test_an_endpoint_that_is_not_there_answers_nothing(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "missing.sock")

    with pytest.raises(Blocked) as blocked:
        engine.must("ping", "GET", "/_ping")

    assert engine.request("GET", "/_ping") == Answer(0, False, b"")
    assert blocked.value.finding.detail == "ping: the endpoint closed, no answer"
    assert exchange(tmp_path / "missing.sock", [b"GET /_ping HTTP/1.1\r\n\r\n"], pause=0) == b""


def test_a_create_the_filter_refuses_is_blocked_and_nothing_is_recorded(
    audit: Context,
) -> None:
    body = {"Image": "x", "HostConfig": {"Privileged": True}}

    with pytest.raises(Blocked) as blocked:
        audit.engine.create("job", body)

    assert blocked.value.finding.outcome is Outcome.REFUSED_BY_FILTER
    assert blocked.value.finding.detail.startswith(
        "create: 403 repro-gate docker proxy: Privileged is refused")
    assert audit.engine.containers == []


def test_a_request_the_filter_passes_meets_no_engine_behind_it(audit: Context) -> None:
    answer = audit.engine.request("GET", "/version")

    assert (answer.status, answer.from_engine) == (502, False)
    assert json.loads(answer.body)["message"].startswith(
        "repro-gate docker proxy: cannot reach the Docker daemon at")


def test_a_raw_exchange_returns_what_the_endpoint_answered(audit: Context) -> None:
    received = exchange(audit.target.endpoint,
                        [b"GET /_ping HTTP/1.1\r\nHost: docker\nX-A: 1\r\n\r\n"], pause=0)

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"a bare LF or CR in the request head is refused" in body


def test_remove_all_forgets_what_was_recorded(audit: Context) -> None:
    audit.engine.containers.append("0123456789abcdef" * 4)
    audit.engine.volumes.append("v")
    audit.engine.images.append("t")

    audit.engine.remove_all()

    assert (audit.engine.containers, audit.engine.volumes, audit.engine.images) == ([], [], [])
