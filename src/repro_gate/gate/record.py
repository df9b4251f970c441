"""What a gate run learned, assembled into the manifest document."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from repro_gate import fingerprint, manifest
from repro_gate.compare.document import Comparison, VaryResult
from repro_gate.compare.trajectory import compare_trajectories
from repro_gate.config import Config
from repro_gate.cost.estimate import cost_of_determinism, not_started
from repro_gate.cost.plan import CostPlan, plan
from repro_gate.errors import GateError
from repro_gate.fingerprint.checklist import weighed
from repro_gate.fingerprint.seeding import unseeded_anchor
from repro_gate.gate import vary_runs, verdict
from repro_gate.gate.evidence import Evidence, qualify
from repro_gate.gate.training_run import RunRecord
from repro_gate.golden.candidate import remove_stale, write_candidate
from repro_gate.golden.check import CHANGED, compare_with_golden
from repro_gate.golden.document import RunData
from repro_gate.golden.document import build as build_golden
from repro_gate.golden.rebuild import RunIn
from repro_gate.probe import COST_FILE, read_json
from repro_gate.render import vary_text
from repro_gate.render.golden_line import golden_line

MAX_ALERT_STEPS = 20
OP_CAUSES = ("forward", "backward", "unknown")


@dataclass
class GateState:
    """What the gate has gathered so far; an error stops the runs but not the manifest."""

    records: list[RunRecord] = field(default_factory=list)
    host_fingerprint: dict[str, Any] = field(default_factory=dict)
    strict_stop: bool = False
    error: GateError | None = None
    evidence: Evidence | None = None  # once the runs were compared
    run_golden: RunIn | None = None  # run G (gate/golden_run.py), once a launcher is open
    vary: list[VaryResult] | None = None  # the runs V-<factor> (gate/vary_runs.py), once run
    # Run A's steps when they are too few for the cost run to time (it was not started), and
    # the plan with the shortest blocks it could have had.
    cost_not_started: int | None = None
    cost_design: CostPlan | None = None


def deterministic(records: list[RunRecord]) -> list[RunRecord]:
    """The deterministic runs, in order (not the localisation run: it is neither compared nor
    timed)."""
    return [r for r in records if r.mode == "deterministic" and r.purpose is None]


def nondeterministic_ops(records: list[RunRecord]) -> list[dict[str, Any]]:
    """Alerts of all runs merged by (op, file, line, kind); `count` is the largest per run."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        # The localisation run re-executes modules; the cost run's deterministic blocks warn
        # of the same ops as the deterministic runs, at other steps: neither is evidence here.
        if record.purpose is not None or record.mode == "cost":
            continue
        for alert in record.alerts:
            key = (alert.get("op"), alert.get("file"), alert.get("line"), alert.get("kind"))
            entry = merged.setdefault(key, {
                "op": str(alert.get("op")),
                "file": alert.get("file"),
                "line": alert.get("line"),
                "count": 0,
                "kind": alert.get("kind", "nondeterministic_op"),
                "runs": [],
                "message": str(alert.get("message", "")),
                "steps": [],
            })
            entry["count"] = max(entry["count"], int(alert.get("count", 1)))
            entry["runs"].append(record.name)
            steps = {*entry["steps"], *_steps(alert)}
            entry["steps"] = sorted(steps)[:MAX_ALERT_STEPS]
    return sorted(merged.values(), key=lambda e: (str(e["file"]), e["line"] or 0, e["op"]))


def _steps(alert: dict[str, Any]) -> list[int]:
    steps = alert.get("steps")
    if not isinstance(steps, list):
        return []
    return [s for s in steps if isinstance(s, int) and not isinstance(s, bool) and s >= 1]


def attach_op(comparison: Comparison, ops: list[dict[str, Any]]) -> None:
    """Name the nondeterministic op seen during the first divergent step, if one was: for a
    divergence in the forward or backward pass (or of unknown cause), the likely culprit."""
    divergence = comparison.get("first_divergence")
    if not divergence or divergence.get("cause") not in OP_CAUSES:
        return
    step = divergence["step"]
    during = [op for op in ops if step in op["steps"] and op["kind"] != "strict_error"]
    first = during[0] if during else None
    divergence["op"] = (
        {"op": first["op"], "file": first["file"], "line": first["line"]} if first else None
    )


def measure_cost(config: Config, state: GateState) -> dict[str, Any] | None:
    """The cost section, or None when no cost run finished (or was needed: too short)."""
    if state.cost_not_started is not None:
        design = state.cost_design or plan(config.cost)
        return dict(not_started(state.cost_not_started, design, config.cost))
    run = next((r for r in state.records if r.mode == "cost" and r.ended_cleanly), None)
    if run is None:
        return None
    report = read_json(run.run_dir, COST_FILE)
    return dict(cost_of_determinism(run.trajectory, plan(config.cost), config.cost,
                                    report if isinstance(report, dict) else None))


def noise_floor(records: list[RunRecord]) -> dict[str, Any] | None:
    """How two default-mode runs differ: the nondeterminism that determinism removes."""
    default = [r for r in records if r.mode == "default" and r.ended_cleanly]
    if len(default) < 2:
        return None
    pair = (default[0].name, default[1].name)
    trajectory = compare_trajectories(default[0].trajectory, default[1].trajectory, pair)
    divergence = trajectory["first_divergence"]
    return {
        "first_divergent_step": divergence["step"] if divergence else None,
        "steps_compared": trajectory["steps_compared"],
        "runs": list(pair),
    }


def assemble(
    config: Config,
    state: GateState,
    comparison: Comparison,
    started_at: str,
    wall_seconds: float,
) -> dict[str, Any]:
    """Build the manifest document from everything the gate learned."""
    ops = nondeterministic_ops(state.records)
    attach_op(comparison, ops)
    sections = fingerprint_sections(config, state)  # may record an error: before the verdict
    attach_unseeded(comparison, sections)
    attach_hash_seeds(comparison, state.records)
    compare_golden(config, state, comparison, sections)
    if config.vary.factors:
        agreed = state.error is None and not state.strict_stop and not verdict.failures(
            comparison, [])
        comparison["vary"] = vary_runs.recorded(config, state.vary, agreed)
    cost = measure_cost(config, state) if config.cost.enabled else None
    if state.error is not None:
        outcome, reasons = verdict.ERROR, [verdict.reason(state.error.kind, state.error.message)]
    else:
        strict = [op for op in ops if op["kind"] == "strict_error"] if state.strict_stop else []
        reasons = verdict.failures(comparison, strict)
        outcome = verdict.FAIL if reasons else verdict.PASS
        if "checklist" in sections:  # a failed item that the runs' agreement contradicts
            sections["checklist"] = weighed(sections["checklist"], runs_agreed=not reasons)
        if not reasons:
            applied = state.evidence is None or state.evidence.probe_loaded
            reasons = verdict.successes(comparison, len(deterministic(state.records)), applied)
            outcome, reasons = numerics_rule(config, comparison, reasons)
            outcome, reasons = portability_rule(config, comparison, outcome, reasons)
        reasons = qualify(reasons, state.evidence)
        outcome, reasons = verdict.with_budget(outcome, reasons, cost)
    document = {
        **manifest.header(config.name, started_at, now()),
        "verdict": outcome,
        "reasons": reasons,
        "wall_seconds": round(wall_seconds, 6),
        "output_dir": str(config.output_dir),
        "config": config.as_document(),
        "runs": [record.to_manifest() for record in state.records],
        "comparison": comparison,
        "nondeterministic_ops": ops,
        "cost": cost,
        "noise_floor": noise_floor(state.records),
    }
    if state.evidence is not None and state.error is None:
        document["evidence"] = state.evidence.to_manifest()
    document.update(sections)
    return document


# A gate whose numbers are not (exactly) its golden file's leaves the file it would bless.
CANDIDATE_STATUSES = ("no_golden", "changed", "within_tolerance")


def compare_golden(config: Config, state: GateState, comparison: Comparison,
                   sections: dict[str, Any]) -> None:
    """Run A against its golden trajectory, once runs A and B agree (`comparison.golden`; None
    when the gate ended in an error, the runs differ or none of their steps was observed)."""
    comparison["golden"] = None
    runs = deterministic(state.records)
    # A golden trajectory is run A's steps: none observed, nothing to compare or to bless.
    unobserved = state.evidence is not None and not state.evidence.steps_observed
    if (state.error is not None or state.strict_stop or not runs or "fingerprint" not in sections
            or not config.golden.path or verdict.failures(comparison, []) or unobserved):
        return
    first = runs[0]
    run = RunData(first.trajectory, sections["fingerprint"],
                  [(a.rel_path, a.path) for a in first.artifacts], config.name)
    try:
        candidate = build_golden(run, now())  # once: the artifacts are read and summarised once
        golden = compare_with_golden(config, run, candidate, state.run_golden)
    except GateError as error:
        state.error = error
        return
    if golden["status"] in CANDIDATE_STATUSES:
        written = write_candidate(candidate, config.output_dir)
        golden["candidate"] = str(written) if written else None
    else:
        remove_stale(config.output_dir, golden["machine_class"])
    comparison["golden"] = golden


def numerics_rule(config: Config, comparison: Comparison, reasons: list[verdict.Reason]
                  ) -> tuple[str, list[verdict.Reason]]:
    """`golden.on_change`: a change of the numerics fails the gate (`fail`) or not (`warn`)."""
    golden = comparison.get("golden")
    if not golden or golden["status"] != CHANGED or config.golden.on_change != "fail":
        return verdict.PASS, reasons
    return verdict.FAIL, [verdict.reason(verdict.NUMERICS_CHANGED, str(golden_line(golden))),
                          *reasons]


def portability_rule(config: Config, comparison: Comparison, outcome: str,
                     reasons: list[verdict.Reason]) -> tuple[str, list[verdict.Reason]]:
    """`vary.on_change`: a factor that changes the numbers fails the gate (`fail`) or is only
    reported (`warn`: the console and the comment still say it)."""
    if not vary_text.changed(comparison) or config.vary.on_change != "fail":
        return outcome, reasons
    return verdict.FAIL, [verdict.reason(verdict.NOT_PORTABLE, vary_text.reason_text(comparison)),
                          *reasons]


def attach_unseeded(comparison: Comparison, sections: dict[str, Any]) -> None:
    """A divergence of a training that left torch unseeded (or seeded it after creating its
    first parameter) names that as its cause: the diagnosis reads `first_divergence.unseeded`."""
    divergence = comparison.get("first_divergence")
    record = ((sections.get("fingerprint") or {}).get("random") or {}).get("seeding")
    anchor = unseeded_anchor(record)
    if divergence and anchor is not None:
        divergence["unseeded"] = anchor


def attach_hash_seeds(comparison: Comparison, records: list[RunRecord]) -> None:
    """A divergence between runs that had different hash seeds records them: the diagnosis
    names the hash seed among the causes of what it can stem from (initial parameters, input)."""
    divergence = comparison.get("first_divergence")
    if not divergence:
        return
    named = set(divergence.get("runs") or [])
    seeds = {r.name: r.hash_seed for r in deterministic(records) if r.name in named}
    values = set(seeds.values())
    if len(values) > 1 and None not in values:
        divergence["hash_seeds"] = {name: str(seed) for name, seed in seeds.items()}


def fingerprint_sections(config: Config, state: GateState) -> dict[str, Any]:
    """fingerprint, checklist, config_hash and environment_diff; empty if the host was not read."""
    if not state.host_fingerprint:
        return {}
    # The environment of the compared runs: the cost run and the noise floor switch determinism
    # off on purpose, and their facts would read as mismatches between the runs.
    in_process = {r.name: r.in_process_fingerprint for r in deterministic(state.records)}
    image = next((r.details["image"] for r in state.records if "image" in r.details), None)
    try:
        return fingerprint.manifest_sections(
            config, state.host_fingerprint, in_process, image, config.baseline
        )
    except GateError as error:
        state.error = state.error or error
        return {}




def now() -> str:
    """The current time as the manifest records it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
