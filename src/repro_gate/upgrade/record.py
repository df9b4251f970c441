"""`upgrade.json` from what `repro-gate upgrade` learned (schemas/upgrade.schema.json)."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, TypedDict

from repro_gate import __version__
from repro_gate.compare.document import Comparison
from repro_gate.compare.status import Numerics
from repro_gate.config import Config
from repro_gate.environments import Environment, Lock
from repro_gate.fingerprint.environment_diff import environment_diff
from repro_gate.gate.pipeline import GateOutcome
from repro_gate.gate.record import now
from repro_gate.gate.verdict import Reason
from repro_gate.manifest.header import TOOL_NAME
from repro_gate.manifest.upgrade_document import UPGRADE_SCHEMA_VERSION, UpgradeVerdict
from repro_gate.upgrade.state import Role, UpgradeState
from repro_gate.upgrade.trials import TrialRun

NUMERICS_CHANGED = "numerics_changed"
CANDIDATE_NOT_REPRODUCIBLE = "candidate_not_reproducible"


class UpgradeReason(Reason, total=False):
    """A reason of upgrade.json: an error's may hold the tool's own explanation."""

    detail: str  # uv's (or pip's) output lines that say what went wrong


class NumericsSection(TypedDict):
    """`numerics`: the baseline's run A against the candidate's, under the check's tolerance."""

    status: Numerics
    tolerance: str | dict[str, Any]
    comparison: Comparison | None


class _Record(TypedDict):
    schema_version: int
    tool: dict[str, str]
    gate: str
    started_at: str
    finished_at: str
    verdict: UpgradeVerdict
    reasons: list[UpgradeReason]
    output_dir: str
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    changes: list[dict[str, Any]]
    numerics: NumericsSection
    reproducibility: dict[str, Any]
    culprits: list[dict[str, Any]]
    culprit_search: dict[str, Any]
    bisect_runs: int
    fingerprint_diff: dict[str, Any] | None
    runs: list[dict[str, Any]]


class UpgradeRecord(_Record, total=False):
    """upgrade.json (schemas/upgrade.schema.json); `reporting` once GitHub was reported to."""

    reporting: dict[str, Any]


def assemble(config: Config, state: UpgradeState) -> UpgradeRecord:
    verdict, reasons = _verdict(state)
    return {
        "schema_version": UPGRADE_SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "gate": config.name,
        "started_at": state.started_at,
        "finished_at": now(),
        "verdict": verdict,
        "reasons": reasons,
        "output_dir": str(config.output_dir),
        "baseline": _lock_entry(state.baseline, state.environments.get("baseline")),
        "candidate": _candidate(state),
        "changes": [asdict(change) for change in state.changes],
        "numerics": {"status": state.numerics_status,
                     "tolerance": (config.upgrade.tolerance or config.tolerance).as_document(),
                     "comparison": state.comparison},
        "reproducibility": _reproducibility(state),
        "culprits": _culprits(state),
        "culprit_search": _search(config, state),
        "bisect_runs": len(state.trials.done) if state.trials else 0,
        "fingerprint_diff": _fingerprint_diff(state),
        "runs": _runs(state),
    }


def _verdict(state: UpgradeState) -> tuple[UpgradeVerdict, list[UpgradeReason]]:
    if state.error is not None:
        entry = UpgradeReason(code=str(state.error.kind), message=state.error.message)
        if state.error.detail:
            entry["detail"] = state.error.detail  # the tool's own explanation, in full
        return UpgradeVerdict.ERROR, [entry]
    candidate = state.gates.get("candidate")
    if candidate is not None and state.numerics_status == Numerics.NOT_COMPARED:
        first = candidate.manifest["reasons"][0]["message"]
        return UpgradeVerdict.NOT_REPRODUCIBLE, [UpgradeReason(
            code=CANDIDATE_NOT_REPRODUCIBLE,
            message=f"the training is not reproducible in the candidate environment: {first}")]
    if state.numerics_status == Numerics.CHANGED:
        return UpgradeVerdict.CHANGED, [UpgradeReason(code=NUMERICS_CHANGED,
                                                      message=_changed_message(state))]
    return UpgradeVerdict.SAME, []


def _changed_message(state: UpgradeState) -> str:
    divergence = state.comparison["first_divergence"] if state.comparison else None
    if divergence:
        parameters = divergence.get("parameters") or []
        shown = ", ".join(parameters[:3]) + (f" and {len(parameters) - 3} more"
                                             if len(parameters) > 3 else "")
        what = (f"they diverge at step {divergence['step']}"
                f" ({divergence.get('cause') or 'cause unknown'}"
                + (f"; parameters {shown}" if shown else "") + ")")
    else:
        what = "the artifacts or the losses differ beyond the tolerance"
    names = [" + ".join(group) for group in state.search.groups] if state.search else []
    culprit = f"; culprit: {', '.join(names)}" if names else ""
    return f"the numerics change with the candidate lock: {what}{culprit}"


def _lock_entry(lock: Lock | None, environment: Environment | None) -> dict[str, Any]:
    return {
        "lock": str(lock.path) if lock else "",
        "format": lock.format if lock else None,
        "sha256": lock.sha256 if lock else None,
        "environment": _environment(environment),
    }


def _candidate(state: UpgradeState) -> dict[str, Any]:
    entry = _lock_entry(state.candidate, state.environments.get("candidate"))
    entry["lock"] = str(state.candidate_kept) if state.candidate_kept else None
    entry["source"] = state.candidate_source
    entry["upgrade"] = list(state.request.packages) if state.request else []
    return entry


def _environment(environment: Environment | None) -> dict[str, Any] | None:
    if environment is None:
        return None
    return {"path": str(environment.path), "lock_sha256": environment.lock_sha256,
            "reused": environment.reused, "installed": len(environment.installed)}


def _reproducibility(state: UpgradeState) -> dict[str, Any]:
    baseline, candidate = state.gates.get("baseline"), state.gates.get("candidate")
    return {"baseline": _gate_summary(state, "baseline"),
            "candidate": _gate_summary(state, "candidate"),
            "new_nondeterministic_ops": _new_ops(baseline, candidate)}


def _gate_summary(state: UpgradeState, role: Role) -> dict[str, Any] | None:
    outcome = state.gates.get(role)
    if outcome is None:
        return None
    manifest = outcome.manifest
    cost = manifest.get("cost")
    return {
        "verdict": manifest["verdict"],
        "manifest": str(outcome.manifest_path) if outcome.manifest_path else None,
        "reasons": manifest["reasons"],
        "cost": None if not cost else {"status": cost.get("status", "inconclusive"),
                                       "pct": cost.get("pct"),
                                       "ci95_pct": cost.get("ci95_pct")},
        "reused": role in state.reused_gates,
        "cache_key": state.gate_keys.get(role),
    }


def _new_ops(baseline: GateOutcome | None, candidate: GateOutcome | None) -> list[dict[str, Any]]:
    if candidate is None:
        return []

    def key(op: dict[str, Any]) -> tuple[Any, ...]:
        return op["op"], op.get("file"), op.get("line")

    seen = {key(op) for op in (baseline.manifest["nondeterministic_ops"] if baseline else [])}
    return [{"op": op["op"], "file": op.get("file"), "line": op.get("line")}
            for op in candidate.manifest["nondeterministic_ops"] if key(op) not in seen]


def _culprits(state: UpgradeState) -> list[dict[str, Any]]:
    if state.search is None:
        return []
    changes = {change.name: change for change in state.changes}
    entries = []
    for index, group in enumerate(state.search.groups):
        evidence = _evidence(state, group, index)
        largest = _largest_difference(evidence.comparison if evidence else None)
        compared = evidence.comparison if evidence else None
        divergence = compared["first_divergence"] if compared else None
        for name in group:
            change = changes[name]
            entries.append({"name": name, "old": change.old, "new": change.new,
                            "kind": change.kind, "group": index,
                            "first_divergence": divergence, **largest})
    return entries


def _evidence(state: UpgradeState, group: tuple[str, ...], index: int) -> TrialRun | None:
    """The confirmation run of a group, else the search's trial of exactly that group."""
    if index < len(state.confirmations) and state.confirmations[index].comparison:
        return state.confirmations[index]
    done = state.trials.done if state.trials else []
    return next((trial for trial in done if set(trial.packages) == set(group)), None)


def _largest_difference(comparison: Comparison | None) -> dict[str, Any]:
    """The largest tensor difference over the artifacts: max abs, its artifact, rel and ULP."""
    found: dict[str, Any] = {"max_abs_diff": None, "max_rel_diff": None, "max_ulp_diff": None,
                             "artifact": None}
    for item in comparison["artifacts"] if comparison else []:
        for tensor in item.get("tensors", []):
            value = tensor.get("max_abs_diff")
            if not _finite(value) or (found["max_abs_diff"] is not None
                                      and value <= found["max_abs_diff"]):
                continue
            rel = tensor.get("max_rel_diff")
            found = {"max_abs_diff": value, "max_rel_diff": rel if _finite(rel) else None,
                     "max_ulp_diff": tensor.get("max_ulp"),
                     "artifact": f"{item['path']}: {tensor['name']}"}
    return found


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _search(config: Config, state: UpgradeState) -> dict[str, Any]:
    done = state.trials.done if state.trials else []
    entry: dict[str, Any] = {
        "status": _search_status(state),
        "runs": len(done),
        "max_runs": config.upgrade.max_bisect_runs,
        "trials": [_trial(trial) for trial in done],
    }
    return entry


def _search_status(state: UpgradeState) -> str:
    if state.search is None:
        return "not_needed"
    if not state.search.complete:
        return "incomplete"
    return "found" if state.search.groups else "not_found"


def _trial(trial: TrialRun) -> dict[str, Any]:
    entry: dict[str, Any] = {"packages": list(trial.packages), "outcome": trial.outcome.value,
                             "step": trial.step}
    if trial.note:
        entry["note"] = trial.note
    return entry


def _fingerprint_diff(state: UpgradeState) -> dict[str, Any] | None:
    baseline, candidate = state.gates.get("baseline"), state.gates.get("candidate")
    if baseline is None or candidate is None:
        return None
    try:
        return environment_diff(baseline.manifest, candidate.manifest)
    except (ValueError, KeyError):
        return None  # a gate that ended in an error records no fingerprint


def _runs(state: UpgradeState) -> list[dict[str, Any]]:
    entries = [{**record.to_manifest(), "environment": role}
               for role, outcome in state.gates.items() for record in outcome.records]
    trials = (state.trials.done if state.trials else []) + state.confirmations
    entries += [{**trial.record.to_manifest(), "environment": "trial",
                 "packages": list(trial.packages)} for trial in trials if trial.record]
    return entries
