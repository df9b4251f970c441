"""One gate run end to end: runs, comparison, cost, verdict, manifest, reporting, metrics."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from repro_gate import __version__, fingerprint
from repro_gate.compare.runs import check_something_compared, compare_runs, empty_comparison
from repro_gate.compare.trajectory import compare_trajectories
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, GateError
from repro_gate.fingerprint.documents import read_document
from repro_gate.gate import collect as artifacts
from repro_gate.gate import runs, verdict
from repro_gate.gate.cost import cost_of_determinism
from repro_gate.launch.base import Launcher, LineSink, RunSpec
from repro_gate.launch.local import LocalLauncher
from repro_gate.manifest import store as manifest
from repro_gate.probe import TRAJECTORY_FILE, probe_output_dir
from repro_gate.publish.github.reporter import GitHubReporter
from repro_gate.publish.metrics.push import push_manifest

SinkFactory = Callable[[str], LineSink]
EXIT_CODES = {verdict.PASS: EXIT_PASS, verdict.FAIL: EXIT_FAIL, verdict.ERROR: EXIT_ERROR}
LOG_TAIL_LINES = 20


@dataclass
class GateOutcome:
    """The result of `run_gate`: the manifest as written, and the process exit code."""

    manifest: dict[str, Any]
    manifest_path: Path | None
    exit_code: int
    error_detail: str = ""


@dataclass
class _State:
    records: list[runs.RunRecord] = field(default_factory=list)
    host_fingerprint: dict[str, Any] = field(default_factory=dict)
    strict_stop: bool = False
    error: GateError | None = None


def run_gate(config: dict[str, Any], sink_for: SinkFactory) -> GateOutcome:
    """Run the whole gate for an effective configuration; never raises a GateError.

    Output directory problems are the one exception: without it no manifest can be written.
    Reporting to GitHub and pushing metrics come last and can never change the verdict.
    """
    started_at = _now()
    started = time.monotonic()
    output_dir = Path(config["output_dir"])
    ensure_writable(output_dir)
    state = _State()
    reporter = GitHubReporter.from_environment(config["name"], config.get("report"))
    try:
        check_baseline(config)
        launcher = make_launcher(config)
        state.host_fingerprint = fingerprint.collect_host(config, Path(config["workdir"]))
        reporter.started()
        preload_torch()
        execute_runs(config, launcher, state, sink_for)
        sides = [record.side() for record in deterministic(state.records)]
        comparison = compare_runs(sides, config["tolerance"])
        if not state.strict_stop:
            check_something_compared(comparison)
    except GateError as error:
        state.error = error
        comparison = empty_comparison(config["tolerance"])
    document = assemble(config, state, comparison, started_at, time.monotonic() - started)
    path = _write(document, output_dir, state)
    document["reporting"] = reporter.finished(document)
    document["metrics"] = push_manifest(document, config.get("metrics"), output_dir)
    if path is not None:
        path = _rewrite(document, output_dir) or path
    return GateOutcome(
        manifest=document,
        manifest_path=path,
        exit_code=EXIT_CODES[document["verdict"]],
        error_detail=state.error.detail if state.error else "",
    )


def config_error_outcome(error: GateError, output_dir: Path) -> GateOutcome:
    """The manifest of a gate that could not start because its configuration is invalid.

    It is written when the output directory allows, so CI still finds a manifest to upload.
    """
    now = _now()
    document = {
        "schema_version": manifest.schema_version(),
        "tool": {"name": "repro-gate", "version": __version__},
        "gate": "repro-gate",
        "verdict": verdict.ERROR,
        "reasons": [verdict.reason(error.kind, error.message)],
        "started_at": now,
        "finished_at": now,
        "output_dir": str(output_dir),
        "config": {},
        "runs": [],
        "comparison": empty_comparison("bitwise"),
        "nondeterministic_ops": [],
        "cost": None,
    }
    try:
        ensure_writable(output_dir)
        path: Path | None = manifest.write(document, output_dir)
    except GateError:
        path = None
    return GateOutcome(document, path, EXIT_ERROR)


def preload_torch() -> None:
    """Import torch in the background while the runs train, so comparing checkpoints later
    does not add its start-up time to the gate."""
    if importlib.util.find_spec("torch") is not None:
        threading.Thread(target=importlib.import_module, args=("torch",), daemon=True).start()


def check_baseline(config: dict[str, Any]) -> None:
    """Fail before any GPU time is spent when the baseline cannot be read."""
    if config.get("baseline"):
        read_document(Path(config["baseline"]), kind="baseline")


def _write(document: dict[str, Any], output_dir: Path, state: _State) -> Path | None:
    try:
        return manifest.write(document, output_dir)
    except GateError as error:
        state.error = error
        document["verdict"] = verdict.ERROR
        document["reasons"] = [verdict.reason(error.kind, error.message)]
        return None


def _rewrite(document: dict[str, Any], output_dir: Path) -> Path | None:
    """Add the reporting and metrics sections; the first manifest stays if that fails."""
    try:
        return manifest.write(document, output_dir)
    except (GateError, OSError) as error:
        print(f"repro-gate: warning: manifest kept without reporting sections: {error}",
              file=sys.stderr)
        return None


def ensure_writable(output_dir: Path) -> None:
    """Create the output directory and prove a file can be written there."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        probe_file = output_dir / ".write-test"
        probe_file.write_bytes(b"")
        probe_file.unlink()
    except OSError as error:
        reason = error.strerror or str(error)
        raise GateError(
            f"output directory {output_dir} is not writable: {reason}", kind="output_dir"
        ) from None


def make_launcher(config: dict[str, Any]) -> Launcher:
    """Docker when an image is configured, else a local subprocess."""
    if config.get("image"):
        from repro_gate.launch.docker import DockerLauncher

        return DockerLauncher.from_config(config)
    return LocalLauncher()


def execute_runs(
    config: dict[str, Any], launcher: Launcher, state: _State, sink_for: SinkFactory
) -> None:
    """Deterministic runs A, B, … (B onwards fail-fast against A), then the cost run."""
    sources_workdir = Path(config["workdir"]) if launcher.name == "local" else None
    for index in range(config["runs"]):
        name = chr(ord("A") + index)
        reference = None
        # Fail-fast compares bits as it goes; under a numeric tolerance the artifacts decide.
        if index > 0 and config["fail_fast"] and config["tolerance"] == "bitwise":
            candidate = probe_output_dir(state.records[0].run_dir) / TRAJECTORY_FILE
            reference = candidate if candidate.is_file() else None
        spec = runs.build_spec(config, launcher, name, "deterministic", reference)
        record = _execute(config, launcher, spec, sources_workdir, sink_for)
        state.records.append(record)
        _check_run(record, state)
        if state.strict_stop or record.stopped == "divergence":
            return
    cost = config["cost"]
    default_runs = 2 if cost["noise_floor"] else 1
    for name in runs.DEFAULT_RUN_NAMES[:default_runs] if cost["enabled"] else ():
        spec = runs.build_spec(config, launcher, name, "default", max_steps=cost["steps"])
        record = _execute(config, launcher, spec, sources_workdir, sink_for)
        state.records.append(record)
        _check_run(record, state)


def _execute(
    config: dict[str, Any],
    launcher: Launcher,
    spec: RunSpec,
    workdir: Path | None,
    sink_for: SinkFactory,
) -> runs.RunRecord:
    sources = artifacts.Sources(spec.run_dir, workdir, Path(config["output_dir"]))
    return runs.execute(launcher, spec, sink_for(spec.name), sources, config.get("artifacts"))


def _check_run(record: runs.RunRecord, state: _State) -> None:
    """Raise for a run that timed out, crashed or left configured globs unmatched."""
    label = f"run {record.name} ({record.mode})"
    if record.timed_out:
        raise GateError(
            f"{label} timed out after {record.wall_seconds:.0f} s and was killed"
            f" (log: {record.log_path})",
            kind="timeout",
            detail=record.log_tail(LOG_TAIL_LINES),
        )
    if not record.ended_cleanly:
        if any(alert.get("kind") == "strict_error" for alert in record.alerts):
            state.strict_stop = True
            return
        raise GateError(
            f"{label} exited with code {record.exit_code} (log: {record.log_path})",
            kind="run_failed",
            detail=record.log_tail(LOG_TAIL_LINES),
        )
    status = record.probe_status or {}
    if status.get("probe") == "failed":
        errors = "; ".join(status.get("errors", [])) or "no detail"
        raise GateError(f"the probe failed in {label}: {errors}", kind="probe_failed")
    if record.unmatched_globs and record.stopped is None:
        raise GateError(
            f"artifact glob {record.unmatched_globs[0]!r} matched no file in {label}"
            " (looked in the run directory and the working directory)",
            kind="no_artifacts",
        )


def deterministic(records: list[runs.RunRecord]) -> list[runs.RunRecord]:
    """The deterministic runs, in order."""
    return [r for r in records if r.mode == "deterministic"]


def nondeterministic_ops(records: list[runs.RunRecord]) -> list[dict[str, Any]]:
    """Alerts of all runs merged by (op, file, line, kind); `count` is the largest per run."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
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
            })
            entry["count"] = max(entry["count"], int(alert.get("count", 1)))
            entry["runs"].append(record.name)
    return sorted(merged.values(), key=lambda e: (str(e["file"]), e["line"] or 0, e["op"]))


def measure_cost(config: dict[str, Any], records: list[runs.RunRecord]) -> dict[str, Any] | None:
    """The cost section, or None when no default-mode run finished."""
    default = [r for r in records if r.mode == "default" and r.ended_cleanly]
    det = [r for r in deterministic(records) if r.ended_cleanly]
    if not default or not det:
        return None
    return dict(cost_of_determinism(
        [r.trajectory for r in det],
        default[0].trajectory,
        det_wall_seconds=det[0].wall_seconds,
        default_wall_seconds=default[0].wall_seconds,
        warmup=config["cost"]["warmup"],
    ))


def noise_floor(records: list[runs.RunRecord]) -> dict[str, Any] | None:
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
    config: dict[str, Any],
    state: _State,
    comparison: dict[str, Any],
    started_at: str,
    wall_seconds: float,
) -> dict[str, Any]:
    """Build the manifest document from everything the gate learned."""
    ops = nondeterministic_ops(state.records)
    sections = fingerprint_sections(config, state)  # may record an error: before the verdict
    if state.error is not None:
        outcome, reasons = verdict.ERROR, [verdict.reason(state.error.kind, state.error.message)]
    else:
        strict = [op for op in ops if op["kind"] == "strict_error"] if state.strict_stop else []
        reasons = verdict.failures(comparison, strict)
        outcome = verdict.FAIL if reasons else verdict.PASS
        if not reasons:
            reasons = verdict.successes(comparison, len(deterministic(state.records)))
    document = {
        "schema_version": manifest.schema_version(),
        "tool": {"name": "repro-gate", "version": __version__},
        "gate": config.get("name", "repro-gate"),
        "verdict": outcome,
        "reasons": reasons,
        "started_at": started_at,
        "finished_at": _now(),
        "wall_seconds": round(wall_seconds, 6),
        "output_dir": str(config["output_dir"]),
        "config": config,
        "runs": [record.to_manifest() for record in state.records],
        "comparison": comparison,
        "nondeterministic_ops": ops,
        "cost": measure_cost(config, state.records) if config["cost"]["enabled"] else None,
        "noise_floor": noise_floor(state.records),
    }
    document.update(sections)
    return document


def fingerprint_sections(config: dict[str, Any], state: _State) -> dict[str, Any]:
    """fingerprint, checklist, config_hash and environment_diff; empty if the host was not read."""
    if not state.host_fingerprint:
        return {}
    in_process = {r.name: r.in_process_fingerprint for r in state.records}
    image = next((r.details["image"] for r in state.records if "image" in r.details), None)
    baseline = Path(config["baseline"]) if config.get("baseline") else None
    try:
        return fingerprint.manifest_sections(
            config, state.host_fingerprint, in_process, image, baseline
        )
    except GateError as error:
        state.error = state.error or error
        return {}


def stderr_sink_for(quiet: bool) -> SinkFactory:
    """Run output streamed to stderr, each line prefixed with its run's name."""

    def factory(name: str) -> LineSink:
        def sink(line: str) -> None:
            if not quiet:
                print(f"[{name}] {line}", file=sys.stderr, flush=True)

        return sink

    return factory


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
