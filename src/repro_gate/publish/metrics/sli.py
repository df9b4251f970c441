"""Turn a run manifest into the SLI metric families one gate pushes for its group.

Counters are cumulative per group: the caller passes the group's current values (read from the
Pushgateway) and whether this run adds to them. Gauges describe the group's last run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from repro_gate.compare.status import Status
from repro_gate.compare.structured import is_number as _is_number
from repro_gate.probe import read_trajectory
from repro_gate.publish.metrics.cost_families import cost_families
from repro_gate.render.cost_text import over_budget_only

VERDICTS = ("pass", "fail", "error")
MODES = ("deterministic", "default")
# Run durations also cover the cost run; its steps mix both arms, so it has no step-time spread.
RUN_MODES = (*MODES, "cost")
CHECKPOINT_KINDS = ("torch", "safetensors")
UNKNOWN = "unknown"
MAX_LABEL_LENGTH = 64

# Counter names as exposed (with `_total`) and as written to CounterMetricFamily (without).
RUNS = "repro_gate_runs"
CHECKPOINT_COMPARISONS = "repro_gate_checkpoint_comparisons"
CHECKPOINT_MATCHES = "repro_gate_checkpoint_matches"
# Fails on the cost budget alone: reproducible runs, which the reproducibility SLI counts as good.
COST_BUDGET_FAILURES = "repro_gate_cost_budget_failures"
# Runs whose numbers changed against the golden trajectory, by what the gate blamed.
NUMERICS_CHANGED = "repro_gate_numerics_changed"
ATTRIBUTIONS = ("code", "environment", "unknown")
# Statements signed by `repro-gate attest`: counted by its own push, carried by every gate's.
ATTESTATIONS = "repro_gate_attestations"
LAST_RUN = "repro_gate_last_run_timestamp_seconds"
LAST_SUCCESS = "repro_gate_last_success_timestamp_seconds"

# A series inside a group: metric name as exposed plus its own labels (grouping labels left out).
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class GroupState:
    """What the Pushgateway holds for one group: every series value, by exposed name and labels."""

    values: dict[SeriesKey, float] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float:
        """A series value, 0 when the group does not have it."""
        return self.values.get(series_key(name, labels), 0.0)

    def has(self, name: str) -> bool:
        """Whether any series of this metric name is in the group."""
        return any(key[0] == name for key in self.values)


@dataclass
class Increments:
    """How much one run adds to each counter of its group."""

    runs: dict[str, int]
    checkpoint_comparisons: int
    checkpoint_matches: int
    cost_budget_failures: int
    numerics_changed: dict[str, int] = field(default_factory=dict)  # by attribution


def series_key(name: str, labels: dict[str, str]) -> SeriesKey:
    """The key of one series, with labels in a stable order."""
    return name, tuple(sorted(labels.items()))


def timestamp(text: str | None) -> float | None:
    """Unix seconds of an RFC 3339 date-time from the manifest; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_timestamp(manifest: dict[str, Any]) -> float | None:
    """When the run finished: the identity of a run inside its group (one writer per group)."""
    return timestamp(manifest.get("finished_at"))


def increments(manifest: dict[str, Any]) -> Increments:
    """What this run adds: one run under its verdict, its checkpoint comparisons, and whether
    it failed on the cost budget alone."""
    compared, matched = checkpoint_counts(manifest)
    verdict = manifest.get("verdict")
    return Increments(
        runs={name: int(name == verdict) for name in VERDICTS},
        checkpoint_comparisons=compared,
        checkpoint_matches=matched,
        cost_budget_failures=int(over_budget_only(manifest)),
        numerics_changed=numerics_changed(manifest),
    )


def numerics_changed(manifest: dict[str, Any]) -> dict[str, int]:
    """1 under the attribution when the numbers changed against the golden trajectory (no
    attribution: `unknown`); all 0 otherwise, and for manifests without a golden comparison."""
    golden = (manifest.get("comparison") or {}).get("golden") or {}
    changed = golden.get("status") == "changed"
    kind = (golden.get("attribution") or {}).get("kind")
    blamed = kind if kind in ATTRIBUTIONS else UNKNOWN
    return {name: int(changed and name == blamed) for name in ATTRIBUTIONS}


def checkpoint_counts(manifest: dict[str, Any]) -> tuple[int, int]:
    """(checkpoints compared, checkpoints whose hashes match) in this run."""
    compared = matched = 0
    for artifact in (manifest.get("comparison") or {}).get("artifacts") or []:
        if (artifact.get("kind") not in CHECKPOINT_KINDS
                or artifact.get("status") == Status.NOT_COMPARED):
            continue
        compared += 1
        hash_a, hash_b = artifact.get("sha256_a"), artifact.get("sha256_b")
        if hash_a and hash_b:
            matched += int(hash_a == hash_b)
        else:
            matched += int(artifact.get("status") == Status.EQUAL)
    return compared, matched


def counter_families(previous: GroupState, added: Increments | None) -> list[Metric]:
    """The group's counters: the previous values, plus this run's increments when it counts.

    Every label combination is always written, so each series exists at 0 before its first
    increment and `increase()` sees that increment.
    """
    runs = CounterMetricFamily(
        RUNS, "Gate runs, by verdict (pass: reproducible).", labels=["verdict"]
    )
    for verdict in VERDICTS:
        extra = added.runs[verdict] if added else 0
        runs.add_metric([verdict], previous.get(RUNS + "_total", verdict=verdict) + extra)
    compared = CounterMetricFamily(
        CHECKPOINT_COMPARISONS, "Checkpoints compared between the deterministic runs."
    )
    compared.add_metric(
        [],
        previous.get(CHECKPOINT_COMPARISONS + "_total")
        + (added.checkpoint_comparisons if added else 0),
    )
    matches = CounterMetricFamily(
        CHECKPOINT_MATCHES, "Checkpoints whose SHA-256 was the same in the deterministic runs."
    )
    matches.add_metric(
        [],
        previous.get(CHECKPOINT_MATCHES + "_total") + (added.checkpoint_matches if added else 0),
    )
    budget = CounterMetricFamily(
        COST_BUDGET_FAILURES,
        "Gate runs that failed on the cost budget alone (reproducible, but over budget).",
    )
    budget.add_metric(
        [],
        previous.get(COST_BUDGET_FAILURES + "_total")
        + (added.cost_budget_failures if added else 0),
    )
    numerics = CounterMetricFamily(
        NUMERICS_CHANGED,
        "Gate runs whose numbers changed against the golden trajectory, by attribution.",
        labels=["attribution"],
    )
    for name in ATTRIBUTIONS:
        extra = added.numerics_changed.get(name, 0) if added else 0
        numerics.add_metric(
            [name], previous.get(NUMERICS_CHANGED + "_total", attribution=name) + extra)
    return [runs, compared, matches, budget, numerics,
            attestation_family(previous.get(ATTESTATIONS + "_total"))]


def attestation_family(value: float) -> Metric:
    """The count of signed attestations: a gate's push carries it as it was, `attest` adds one."""
    family = CounterMetricFamily(
        ATTESTATIONS, "Gate statements signed by repro-gate attest (DSSE envelopes).")
    family.add_metric([], value)
    return family


def gauge_families(manifest: dict[str, Any], previous: GroupState) -> list[Metric]:
    """Gauges that describe the run in `manifest`, the group's last run."""
    finished = run_timestamp(manifest) or 0.0
    verdict = manifest.get("verdict")
    families: list[Metric] = [
        _gauge(LAST_RUN, "When the last run finished (Unix seconds).", finished),
        _gauge(
            LAST_SUCCESS,
            "When the last reproducible (pass) run finished (Unix seconds).",
            finished if verdict == "pass" else previous.get(LAST_SUCCESS),
        ),
    ]
    last_verdict = GaugeMetricFamily(
        "repro_gate_last_run_verdict",
        "1 for the verdict of the last run, 0 otherwise.",
        labels=["verdict"],
    )
    for name in VERDICTS:
        last_verdict.add_metric([name], float(name == verdict))
    families.append(last_verdict)
    families.extend(cost_families(manifest.get("cost")))
    families.append(_durations(manifest.get("runs") or []))
    spread = _step_spread(manifest)
    if spread is not None:
        families.append(spread)
    families.append(
        _gauge(
            "repro_gate_max_abs_divergence",
            "Largest absolute element difference between the deterministic runs' tensors.",
            max_abs_divergence(manifest),
        )
    )
    first = (manifest.get("comparison") or {}).get("first_divergence")
    if isinstance(first, dict) and isinstance(first.get("step"), int):
        families.append(
            _gauge(
                "repro_gate_first_divergence_step",
                "First optimizer step where the deterministic runs differed.",
                first["step"],
            )
        )
    ops = manifest.get("nondeterministic_ops") or []
    families.append(
        _gauge(
            "repro_gate_nondeterministic_ops",
            "Distinct nondeterministic operations observed in the last run.",
            len({(op.get("op"), op.get("file"), op.get("line")) for op in ops}),
        )
    )
    families.append(
        _gauge(
            "repro_gate_nondeterministic_op_calls",
            "Calls of nondeterministic operations observed in the last run.",
            sum(int(op.get("count") or 0) for op in ops),
        )
    )
    info = InfoMetricFamily(
        "repro_gate_environment", "Environment of the last run (torch, CUDA, driver, GPU model)."
    )
    info.add_metric([], environment_labels(manifest.get("fingerprint")))
    families.append(info)
    return families


def carried_gauges(previous: GroupState, counter_names: Iterable[str]) -> list[Metric]:
    """The group's current gauges, unchanged (a late push of an older run must not replace them)."""
    skip = set(counter_names) | {"push_time_seconds", "push_failure_time_seconds"}
    by_name: dict[str, GaugeMetricFamily] = {}
    for (name, labels), value in sorted(previous.values.items()):
        if name in skip:
            continue
        family = by_name.get(name)
        if family is None:
            family = by_name[name] = GaugeMetricFamily(
                name, previous.helps.get(name, ""), labels=[k for k, _ in labels]
            )
        family.add_metric([v for _, v in labels], value)
    return list(by_name.values())


def max_abs_divergence(manifest: dict[str, Any]) -> float:
    """Largest `max_abs_diff` over every compared tensor; 0 when all were equal."""
    largest = 0.0
    for artifact in (manifest.get("comparison") or {}).get("artifacts") or []:
        for tensor in artifact.get("tensors") or []:
            value = tensor.get("max_abs_diff")
            if _is_number(value):
                # A NaN or infinite difference is the worst divergence there is.
                largest = max(largest, value if math.isfinite(value) else math.inf)
    return largest


def environment_labels(fingerprint: dict[str, Any] | None) -> dict[str, str]:
    """torch, CUDA build, driver and GPU model from the fingerprint; "unknown" where absent."""
    if fingerprint is None:
        return {"torch": UNKNOWN, "cuda": UNKNOWN, "driver": UNKNOWN, "gpu_model": UNKNOWN}
    env, hardware = fingerprint["env"], fingerprint["hardware"]
    gpu_names = [gpu["name"] for gpu in hardware["gpus"] if gpu["name"]]
    return {
        "torch": _label(env["torch"]),
        "cuda": _label(env["cuda_build"]),
        "driver": _label(hardware["driver_version"]),
        "gpu_model": _label(gpu_names[0] if gpu_names else None),
    }


def registry(families: list[Metric]) -> CollectorRegistry:
    """A registry that exposes exactly `families`."""
    holder = CollectorRegistry(auto_describe=False)
    holder.register(_Families(families))
    return holder


def collect_text(families: list[Metric]) -> bytes:
    """The families in the Prometheus text format, as pushed and as kept in `metrics.prom`."""
    return generate_latest(registry(families))


class _Families:
    """A collector that yields a fixed list of metric families."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))


def _durations(runs: list[dict[str, Any]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "repro_gate_run_duration_seconds",
        "Mean wall time of the last run's runs, by mode.",
        labels=["mode"],
    )
    for mode in RUN_MODES:
        seconds = [float(run["wall_seconds"]) for run in runs if run.get("mode") == mode]
        if seconds:
            family.add_metric([mode], statistics.fmean(seconds))
    return family


def _step_spread(manifest: dict[str, Any]) -> GaugeMetricFamily | None:
    """Standard deviation of per-step times by mode, from the trajectories in the run dirs."""
    cost = manifest.get("cost") or {}
    # The warm-up is in the cost's `design` (schema 3); older manifests kept it at the top.
    warmup = int((cost.get("design") or {}).get("warmup_steps") or cost.get("warmup_steps") or 0)
    family = GaugeMetricFamily(
        "repro_gate_step_duration_stddev_seconds",
        "Standard deviation of optimizer step times after warm-up, by mode.",
        labels=["mode"],
    )
    for mode in MODES:
        times: list[float] = []
        for run in manifest.get("runs") or []:
            if run.get("mode") == mode and run.get("run_dir"):
                trajectory = read_trajectory(Path(run["run_dir"]))
                steps = [float(s["time"]) for s in trajectory if _is_number(s.get("time"))]
                times.extend(steps[min(warmup, max(len(steps) - 1, 0)) :])
        if len(times) >= 2:
            family.add_metric([mode], statistics.pstdev(times))
    return family if family.samples else None


def _label(value: str | None) -> str:
    # Label values stay short and bounded: one per version or model, never free text.
    if value is None or not value.strip():
        return UNKNOWN
    return value.strip()[:MAX_LABEL_LENGTH]
