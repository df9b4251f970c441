"""The audit's attempts on other slots and leaks through the real proxy: what the filter
refuses by rule, and an engine that fetched the loopback URL, which is an escape even when
the step then failed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from repro_gate.runner.audit import other_slots
from repro_gate.runner.audit.engine import Blocked, Finding, Outcome
from repro_gate.runner.audit.steps import Context


@pytest.mark.parametrize(("attempt", "refusal"), [
    (other_slots.links_environment, "create: 403 repro-gate docker proxy: HostConfig.Links is"
                                    " refused"),
    (other_slots.volumes_from_other, "create: 403 repro-gate docker proxy: HostConfig."
                                     "VolumesFrom is refused"),
    (other_slots.other_work_folder, "' is refused: only paths inside the slot's work folder"),
    (other_slots.build_in_other_network, "build: 403 repro-gate docker proxy: builds are"
                                         " refused"),
    (other_slots.build_cgroup_parent, "build: 403 repro-gate docker proxy: builds are refused"),
    (other_slots.system_df, "df: 403 repro-gate docker proxy: system/df is refused"),
])
def test_the_filter_refuses_each_reach_into_another_slot(
    attempt: Callable[[Context], Finding], refusal: str, audit: Context
) -> None:
    with pytest.raises(Blocked) as blocked:
        attempt(audit)

    assert blocked.value.finding.outcome is Outcome.REFUSED_BY_FILTER
    assert refusal in blocked.value.finding.detail, blocked.value.finding.detail


def test_security_opt_disable_is_refused_by_the_filter(audit: Context) -> None:
    with pytest.raises(Blocked) as blocked:
        other_slots.security_opt_disable(audit)

    assert "HostConfig.SecurityOpt 'disable' is refused" in blocked.value.finding.detail


@pytest.mark.parametrize(("attempt", "token"), [
    (other_slots.import_from_url, "from-src-0"),
    (other_slots.build_from_remote, "remote-0"),
])
def test_a_loopback_url_the_engine_fetched_is_an_escape_though_the_step_failed(
    attempt: Callable[[Context], Finding], token: str, audit: Context,
    fetched: Callable[[Context, str], None],
) -> None:
    fetched(audit, f"{audit.prefix}{token}")

    finding = attempt(audit)

    assert finding == Finding(Outcome.ESCAPED, "the engine fetched a URL on the host's loopback")
