"""`run_audit` and its report: the table the command prints and its verdict, one row per
attempt (not run without another slot, the refusal of a blocked step, a GateError for an
answer it cannot read), and an endpoint that does not answer a ping."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.runner.audit.canaries import OtherSlot
from repro_gate.runner.audit.engine import Finding, Outcome
from repro_gate.runner.audit.run import AuditReport, AuditRow, _row, run_audit
from repro_gate.runner.audit.steps import Attempt, AuditTarget, Context
from repro_gate.runner.audit.table import ATTEMPTS

ROWS = (AuditRow("framing", "bare-LF second request", Outcome.REFUSED_BY_FILTER,
                 "the endpoint answered 400"),
        AuditRow("other slots", "inspect", Outcome.NOT_RUN, "no other slot to reach"),
        AuditRow("gpu", "Count -1", Outcome.ESCAPED, "started with NVIDIA_VISIBLE_DEVICES=all"))


def test_the_report_is_a_table_with_a_verdict() -> None:
    lines = AuditReport(ROWS).render().splitlines()
    header = lines[0]
    columns = [header.index(name) for name in ("class", "attempt", "outcome", "detail")]

    assert header.split() == ["class", "attempt", "outcome", "detail"]
    for line, row in zip(lines[1:4], ROWS, strict=True):
        cells = (row.klass, row.attempt, row.outcome.value, row.detail)
        assert [line[start:].split("  ")[0] for start in columns] == list(cells)
        assert line.endswith(row.detail)
    assert lines[4:] == ["", "3 attempts: 1 attempt(s) ESCAPED"]


def test_escaped_only_when_a_row_escaped() -> None:
    safe = AuditReport(ROWS[:2])

    assert AuditReport(ROWS).escaped and not safe.escaped
    assert safe.render().endswith("2 attempts: nothing escaped\n")


def test_attempts_on_another_slot_are_not_run_without_one(audit: Context) -> None:
    one_slot = replace(audit, canaries=replace(audit.canaries,
                                               other=OtherSlot(None, None, None)))
    attempt = next(a for a in ATTEMPTS if a.needs_other_slot)

    assert _row(attempt, one_slot) == AuditRow(attempt.klass, attempt.name, Outcome.NOT_RUN,
                                               "no other slot to reach")


def test_a_blocked_attempt_is_a_row_with_the_filters_refusal(audit: Context) -> None:
    attempt = next(a for a in ATTEMPTS if a.name == "Privileged")

    row = _row(attempt, audit)

    assert (row.klass, row.outcome) == ("host", Outcome.REFUSED_BY_FILTER)
    assert row.detail.startswith("create: 403 repro-gate docker proxy: Privileged is refused")


def test_an_answer_the_attempt_cannot_read_stops_the_audit(audit: Context) -> None:
    def unreadable(context: Context) -> Finding:
        return Finding(Outcome.NO_EFFECT, str({}["Id"]))

    with pytest.raises(GateError) as stopped:
        _row(Attempt("leaks", "list", unreadable), audit)

    assert stopped.value.kind is ErrorKind.DOCKER
    assert str(stopped.value) == ("runner audit: leaks / list: could not tell what happened:"
                                  " 'Id'")


def test_an_endpoint_that_does_not_answer_a_ping_stops_the_audit(tmp_path: Path) -> None:
    target = AuditTarget(tmp_path / "missing.sock", tmp_path, "GPU-1", "GPU-2", None, None,
                         "busybox")

    with pytest.raises(GateError) as stopped:
        run_audit(target, tmp_path / "canaries")

    assert stopped.value.kind is ErrorKind.DOCKER
    assert str(stopped.value) == (f"runner audit: the slot endpoint {tmp_path / 'missing.sock'}"
                                  " does not answer a ping")
    assert list(tmp_path.iterdir()) == []  # nothing planted
