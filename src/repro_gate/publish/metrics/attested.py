"""Count a signed attestation on the Pushgateway: `repro_gate_attestations_total` of the gate's
group, one more per `repro-gate attest` (docs/metrics.md).

Only that counter is sent (HTTP POST): the group's other metrics, the last gate's, stay as they
are. A counter the group has never held is first published at 0, as a gate's push does with a
new group, so that `increase()` sees the first signing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repro_gate.config import MetricsConfig
from repro_gate.errors import PushError, one_line
from repro_gate.publish.deadline import Deadline, DeadlineExceeded
from repro_gate.publish.metrics import sli
from repro_gate.publish.metrics.pushgateway import (
    FINAL_EXCHANGE_SECONDS,
    Target,
    post_families,
    read_group,
    resolve_target,
)

COUNTER = sli.ATTESTATIONS + "_total"


@dataclass(frozen=True)
class AttestedPush:
    counted: bool
    line: str  # what happened, one line


def push_attested(manifest: Mapping[str, Any], settings: MetricsConfig,
                  environ: Mapping[str, str]) -> AttestedPush | None:
    """Add one to the group's count within `settings.timeout`; None when no gateway is
    configured. Never raises."""
    try:
        target = resolve_target(dict(manifest), settings, environ)
    except ValueError as error:
        return AttestedPush(False, f"attestation not counted: {error}")
    if target is None:
        return None
    deadline = Deadline(settings.timeout)
    try:
        total = deadline.run(lambda: count_once(target, deadline), "attestation count")
    except DeadlineExceeded:
        return AttestedPush(False, f"attestation not counted: no answer from"
                                   f" {target.display_url} within {settings.timeout:g}s")
    except (PushError, OSError) as error:
        return AttestedPush(False, f"attestation not counted at {target.display_url}:"
                                   f" {one_line(error)}")
    return AttestedPush(True, f"attestation counted at {target.display_url}"
                              f" ({COUNTER} {total:g})")


def count_once(target: Target, deadline: Deadline) -> float:
    """Read the group's count, POST it plus one; the new count."""
    previous = read_group(target, deadline)
    if previous is None or not previous.has(COUNTER):
        post_families(target, [sli.attestation_family(0.0)], deadline)
        wait = min(target.new_group_wait, max(0.0, deadline.remaining() - FINAL_EXCHANGE_SECONDS))
        time.sleep(wait)
        previous = read_group(target, deadline) or sli.GroupState()
    total = previous.get(COUNTER) + 1
    post_families(target, [sli.attestation_family(total)], deadline)
    return total
