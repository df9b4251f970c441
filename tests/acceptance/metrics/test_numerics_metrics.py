"""`repro_gate_numerics_changed_total`: the runs whose numbers changed against the golden
trajectory, counted by attribution in a real Pushgateway; a run without a golden comparison, or
with unchanged numbers, adds nothing but still writes every series at 0."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers.metrics_servers import Pushgateway, make_manifest

from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

COUNTER = "repro_gate_numerics_changed_total"
GROUP = {"job": "repro-gate", "repository": "octo/vision", "gate": "train", "runner_slot": "s1"}


def with_golden(manifest: dict[str, Any], status: str, attribution: str | None) -> dict[str, Any]:
    manifest["comparison"]["golden"] = {
        "status": status, "path": ".repro-gate/golden/cpu-x86-64.json",
        "machine_class": "cpu-x86-64", "golden_machine_class": "cpu-x86-64",
        "bless_command": "repro-gate bless", "software_diff": [], "steps_compared": 6,
        "artifacts_compared": 1, "first_divergence": None, "largest_difference": None,
        "loss_delta": [], "against_base": None,
        "attribution": None if attribution is None else {"kind": attribution, "reason": "r"},
    }
    return manifest


def test_changed_numerics_are_counted_by_attribution(
    tmp_path: Path, pushgateway: Pushgateway
) -> None:
    environ = {"REPRO_GATE_PUSHGATEWAY_URL": pushgateway.url, "GITHUB_REPOSITORY": "octo/vision",
               "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT": "0"}
    now = datetime.now(timezone.utc)
    runs = [
        make_manifest("pass"),  # no golden comparison at all
        with_golden(make_manifest("fail"), "changed", "code"),
        with_golden(make_manifest("fail"), "changed", "code"),
        with_golden(make_manifest("fail"), "changed", "environment"),
        with_golden(make_manifest("fail"), "changed", None),
        with_golden(make_manifest("pass"), "within_tolerance", None),
        with_golden(make_manifest("pass"), "same", None),
    ]
    seen = []
    for offset, manifest in enumerate(reversed(runs), start=1):
        manifest["finished_at"] = (now - timedelta(seconds=offset)).isoformat()
    for manifest in runs:
        section = push_manifest(manifest, MetricsConfig(runner_slot="s1"), tmp_path, environ)
        assert section["pushed"] and section["counted"], section
        seen.append({kind: pushgateway.value(COUNTER, GROUP, attribution=kind)
                     for kind in ("code", "environment", "unknown")})
    assert seen[0] == {"code": 0.0, "environment": 0.0, "unknown": 0.0}
    assert seen[-1] == {"code": 2.0, "environment": 1.0, "unknown": 1.0}
