"""The audit's framing attempts through the real proxy: each hides a second request (an import
from the loopback URL) where a filter that parses differently would not look. The proxy refuses
the first request and hangs up; an engine that served the hidden one fetches the URL, which
makes the attempt an escape."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from repro_gate.runner.audit import framing
from repro_gate.runner.audit.engine import Finding, Outcome
from repro_gate.runner.audit.steps import Context


@pytest.mark.parametrize(("attempt", "token"), [
    (framing.bare_lf_smuggling, "bare-lf-0"),
    (framing.expect_then_head, "expect-0"),
])
def test_a_smuggled_request_that_made_the_engine_fetch_is_an_escape(
    attempt: Callable[[Context], Finding], token: str, audit: Context,
    fetched: Callable[[Context, str], None],
) -> None:
    fetched(audit, f"{audit.prefix}{token}")

    finding = attempt(audit)

    assert finding == Finding(Outcome.ESCAPED, "the smuggled request reached the engine and it"
                                               " fetched a URL on the host's loopback")


def test_the_expect_attempt_records_the_container_it_may_have_made(
    audit: Context, fetched: Callable[[Context, str], None],
) -> None:
    fetched(audit, f"{audit.prefix}expect-0")

    framing.expect_then_head(audit)

    assert audit.engine.containers == [f"{audit.prefix}expect-1"]  # removed by name

