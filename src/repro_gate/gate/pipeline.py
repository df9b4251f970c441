"""One gate run: runs, comparison, verdict, manifest; publishing happens around it.

The command hands the gate its configuration, a way to open a launcher, a publisher and a sink
for the runs' output. The gate decides and records; the verdict and the comparison are final
(and written) before the publisher is told, and nothing the publisher does changes them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate import fingerprint, manifest
from repro_gate.compare.runs import check_something_compared, compare_runs, empty_comparison
from repro_gate.config import DEFAULT_NAME, Config, ToleranceConfig
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, ErrorKind, GateError
from repro_gate.gate import runs, verdict
from repro_gate.gate.collect import Sources
from repro_gate.gate.record import GateState, assemble, deterministic, now
from repro_gate.launch.base import Launcher, LineSink, RunSpec
from repro_gate.probe import TRAJECTORY_FILE, probe_output_dir
from repro_gate.publish import Publisher

SinkFactory = Callable[[str], LineSink]
LauncherFactory = Callable[[Config], Launcher]
EXIT_CODES = {verdict.PASS: EXIT_PASS, verdict.FAIL: EXIT_FAIL, verdict.ERROR: EXIT_ERROR}
LOG_TAIL_LINES = 20


@dataclass
class GateOutcome:
    """The result of `run_gate`: the manifest as written, and the process exit code."""

    manifest: dict[str, Any]
    manifest_path: Path | None
    exit_code: int
    error_detail: str = ""


def run_gate(
    config: Config, open_launcher: LauncherFactory, publisher: Publisher, sink_for: SinkFactory
) -> GateOutcome:
    """Run the whole gate for an effective configuration; never raises a GateError.

    Output directory problems are the one exception: without it no manifest can be written.
    """
    started_at = now()
    started = time.monotonic()
    ensure_writable(config.output_dir)
    state = GateState()
    try:
        check_baseline(config)
        launcher = open_launcher(config)
        state.host_fingerprint = fingerprint.collect_host(config.data, config.workdir)
        publisher.started()
        preload_torch()
        execute_runs(config, launcher, state, sink_for)
        sides = [record.side() for record in deterministic(state.records)]
        comparison = compare_runs(sides, config.tolerance)
        if not state.strict_stop:
            check_something_compared(comparison)
    except GateError as error:
        state.error = error
        comparison = empty_comparison(config.tolerance)
    document = assemble(config, state, comparison, started_at, time.monotonic() - started)
    path = _write(document, config.output_dir, state)
    document.update(publisher.finished(document, path))
    if path is not None:
        path = _rewrite(document, config.output_dir) or path
    return GateOutcome(
        manifest=document,
        manifest_path=path,
        exit_code=EXIT_CODES[document["verdict"]],
        error_detail=state.error.detail if state.error else "",
    )


def configuration_error(error: GateError, output_dir: Path, publisher: Publisher) -> GateOutcome:
    """The manifest of a gate that could not start because its configuration is invalid.

    It is written when the output directory allows, so CI still finds a manifest to upload.
    """
    document = {
        **manifest.header(DEFAULT_NAME, now(), now()),
        "verdict": verdict.ERROR,
        "reasons": [verdict.reason(error.kind, error.message)],
        "output_dir": str(output_dir),
        "config": {},
        "runs": [],
        "comparison": empty_comparison(ToleranceConfig()),
        "nondeterministic_ops": [],
        "cost": None,
    }
    try:
        ensure_writable(output_dir)
        path: Path | None = manifest.write(document, output_dir)
    except GateError:
        path = None
    document.update(publisher.finished(document, path))
    return GateOutcome(document, path, EXIT_ERROR)


def preload_torch() -> None:
    """Import torch in the background while the runs train, so comparing checkpoints later
    does not add its start-up time to the gate."""
    if importlib.util.find_spec("torch") is not None:
        threading.Thread(target=importlib.import_module, args=("torch",), daemon=True).start()


def check_baseline(config: Config) -> None:
    """Fail before any GPU time is spent when the baseline cannot be read."""
    if config.baseline is not None:
        manifest.read_document(config.baseline, kind=ErrorKind.BASELINE)


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
            f"output directory {output_dir} is not writable: {reason}", kind=ErrorKind.OUTPUT_DIR
        ) from None


def execute_runs(
    config: Config, launcher: Launcher, state: GateState, sink_for: SinkFactory
) -> None:
    """Deterministic runs A, B, … (B onwards fail-fast against A), then the cost run."""
    for index in range(config.runs):
        name = chr(ord("A") + index)
        reference = None
        # Fail-fast compares bits as it goes; under a numeric tolerance the artifacts decide.
        if index > 0 and config.fail_fast and config.tolerance.bitwise:
            candidate = probe_output_dir(state.records[0].run_dir) / TRAJECTORY_FILE
            reference = candidate if candidate.is_file() else None
        spec = runs.build_spec(config, launcher, name, "deterministic", reference)
        record = _execute(config, launcher, spec, sink_for)
        state.records.append(record)
        _check_run(record, state)
        if state.strict_stop or record.stopped == "divergence":
            return
    default_runs = 2 if config.cost.noise_floor else 1
    for name in runs.DEFAULT_RUN_NAMES[:default_runs] if config.cost.enabled else ():
        spec = runs.build_spec(config, launcher, name, "default", max_steps=config.cost.steps)
        record = _execute(config, launcher, spec, sink_for)
        state.records.append(record)
        _check_run(record, state)


def _execute(
    config: Config, launcher: Launcher, spec: RunSpec, sink_for: SinkFactory
) -> runs.RunRecord:
    # Container runs see a read-only workspace: only local runs collect from the workdir.
    workdir = config.workdir if launcher.name == "local" else None
    sources = Sources(spec.run_dir, workdir, config.output_dir)
    return runs.execute(launcher, spec, sink_for(spec.name), sources, list(config.artifacts))


def _check_run(record: runs.RunRecord, state: GateState) -> None:
    """Raise for a run that timed out, crashed or left configured globs unmatched."""
    label = f"run {record.name} ({record.mode})"
    if record.timed_out:
        raise GateError(
            f"{label} timed out after {record.wall_seconds:.0f} s and was killed"
            f" (log: {record.log_path})",
            kind=ErrorKind.TIMEOUT,
            detail=record.log_tail(LOG_TAIL_LINES),
        )
    if not record.ended_cleanly:
        if any(alert.get("kind") == "strict_error" for alert in record.alerts):
            state.strict_stop = True
            return
        raise GateError(
            f"{label} exited with code {record.exit_code} (log: {record.log_path})",
            kind=ErrorKind.RUN_FAILED,
            detail=record.log_tail(LOG_TAIL_LINES),
        )
    status = record.probe_status or {}
    if status.get("probe") == "failed":
        errors = "; ".join(status.get("errors", [])) or "no detail"
        raise GateError(f"the probe failed in {label}: {errors}", kind=ErrorKind.PROBE_FAILED)
    if record.unmatched_globs and record.stopped is None:
        raise GateError(
            f"artifact glob {record.unmatched_globs[0]!r} matched no file in {label}"
            " (looked in the run directory and the working directory)",
            kind=ErrorKind.NO_ARTIFACTS,
        )


def _write(document: dict[str, Any], output_dir: Path, state: GateState) -> Path | None:
    try:
        return manifest.write(document, output_dir)
    except GateError as error:
        state.error = error
        document["verdict"] = verdict.ERROR
        document["reasons"] = [verdict.reason(error.kind, error.message)]
        return None


def _rewrite(document: dict[str, Any], output_dir: Path) -> Path | None:
    """Add the publishing sections; the first manifest stays if that fails."""
    try:
        return manifest.write(document, output_dir)
    except (GateError, OSError) as error:
        print(f"repro-gate: warning: manifest kept without reporting sections: {error}",
              file=sys.stderr)
        return None

