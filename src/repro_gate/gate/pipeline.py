"""One gate run: runs, comparison, verdict, manifest; publishing happens around it.

The command hands the gate its configuration, a way to open a launcher, a publisher and a sink
for the runs' output. The gate decides and records; the verdict and the comparison are final
(and written) before the publisher is told, and nothing the publisher does changes them.
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro_gate import fingerprint, manifest, notices
from repro_gate.attestation import statement as attestation
from repro_gate.compare.document import Comparison
from repro_gate.compare.run_pair import check_something_compared, compare_runs, empty_comparison
from repro_gate.config import DEFAULT_NAME, Config, ToleranceConfig
from repro_gate.cost import estimate as cost_estimate
from repro_gate.cost import plan as cost_plan
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, ErrorKind, GateError, one_line
from repro_gate.gate import (
    evidence,
    fail_fast,
    file_lock,
    golden_run,
    resume_run,
    training_run,
    vary_runs,
    verdict,
)
from repro_gate.gate.collect import written_nearest
from repro_gate.gate.localise import localise
from repro_gate.gate.record import GateState, assemble, deterministic, now
from repro_gate.launch import cancel, progress
from repro_gate.launch.base import Launcher, LineSink, Mode, RunSpec
from repro_gate.manifest.store import INVALID_MANIFEST_NAME
from repro_gate.probe import read_trajectory
from repro_gate.publish import Publisher

SinkFactory = Callable[[str], LineSink]
LauncherFactory = Callable[[Config], Launcher]
EXIT_CODES = {verdict.PASS: EXIT_PASS, verdict.FAIL: EXIT_FAIL, verdict.ERROR: EXIT_ERROR}
GATE_LOG = "gate.log"  # in <output_dir>/logs: tracebacks of internal errors
# Subdirectories of the output directory the gate writes into.
OUTPUT_SUBDIRS = ("logs", "runs")


@dataclass
class GateOutcome:
    """The result of `run_gate`: the manifest as written, and the process exit code."""

    manifest: dict[str, Any]
    manifest_path: Path | None
    exit_code: int
    error_detail: str = ""
    records: list[training_run.RunRecord] = field(default_factory=list)  # every run, in order


def run_gate(
    config: Config, open_launcher: LauncherFactory, publisher: Publisher, sink_for: SinkFactory
) -> GateOutcome:
    """Run the whole gate for an effective configuration; never raises a GateError.

    Output directory problems are the one exception: without it no manifest can be written.
    An unexpected exception becomes the error `internal`, with its traceback in logs/gate.log.
    """
    ensure_writable(config.output_dir)
    try:
        return _run_gate(config, open_launcher, publisher, sink_for)
    except Exception as error:  # the one boundary for the unexpected
        return _internal_failure(config, internal_error(error, config.output_dir), publisher)


def _run_gate(
    config: Config, open_launcher: LauncherFactory, publisher: Publisher, sink_for: SinkFactory
) -> GateOutcome:
    started_at = now()
    started = time.monotonic()
    state = GateState()
    try:
        check_baseline(config)
        launcher = open_launcher(config)
        state.run_golden = golden_run.runner(config, launcher, state.records, sink_for)
        state.host_fingerprint = fingerprint.collect_host(
            config.data, config.workdir, gate_files=file_lock.gate_files(config))
        publisher.started()
        execute_runs(config, launcher, state, sink_for)
        sides = [record.side() for record in deterministic(state.records)]
        with progress.watching_phase("comparing the runs' records and artifacts"):
            comparison = compare_runs(sides, config.tolerance, config.compare)
        localise(config, launcher, state, comparison,
                 lambda spec: _execute(config, launcher, spec, sink_for))
        if not state.strict_stop:
            state.evidence = evidence.gather(config, deterministic(state.records))
            evidence.check(state.evidence, comparison)
            check_something_compared(comparison)
        if config.resume is not None:
            _check_resume(config, launcher, state, comparison, sink_for)
    except GateError as error:
        state.error = error
        comparison = empty_comparison(config.tolerance)
    except Exception as error:  # the runs are stopped; record it, then report
        state.error = internal_error(error, config.output_dir)
        comparison = empty_comparison(config.tolerance)
    # The verdict is decided: a late signal no longer cuts writing and publishing it short.
    cancel.ignore_from_now()
    comparison.setdefault("resume", resume_run.unchecked(config, agreed=True))
    with progress.watching_phase("hashing the artifacts for the manifest"):
        document = assemble(config, state, comparison, started_at, time.monotonic() - started)
    path = _write(document, config.output_dir, state)
    attestation.write_beside(document, config.output_dir)  # a verdict's in-toto Statement
    document.update(publisher.finished(document, path))
    if path is not None:
        path = _rewrite(document, config.output_dir) or path
    return GateOutcome(
        manifest=document,
        manifest_path=path,
        exit_code=exit_code(document, state.error),
        error_detail=state.error.detail if state.error else "",
        records=state.records,
    )


def exit_code(document: dict[str, Any], error: GateError | None) -> int:
    """The verdict's exit code; an error's own where it has one (`run_tampered`: 5)."""
    if document["verdict"] == verdict.ERROR and error is not None:
        return error.exit_code
    return EXIT_CODES[document["verdict"]]


def _check_resume(config: Config, launcher: Launcher, state: GateState, comparison: Comparison,
                  sink_for: SinkFactory) -> None:
    """Run R once runs A and B agree (gate/resume_run.py); else the check is `not_run`."""
    runs = deterministic(state.records)
    agreed = bool(runs) and not state.strict_stop and not verdict.failures(comparison, [])
    if not agreed:
        comparison["resume"] = resume_run.unchecked(config, agreed, state.strict_stop)
        return
    state.records.append(resume_run.check(config, launcher, runs[0], comparison, sink_for))


def configuration_error(error: GateError, output_dir: Path, publisher: Publisher) -> GateOutcome:
    """The manifest of a gate that could not start because its configuration is invalid.

    It is written when the output directory allows, so CI still finds a manifest to upload.
    """
    return _error_only(error, DEFAULT_NAME, output_dir, publisher)


def internal_error(error: Exception, output_dir: Path) -> GateError:
    """An unexpected exception as one line; its traceback goes to <output_dir>/logs/gate.log."""
    log = output_dir / "logs" / GATE_LOG
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as file:
            file.write(f"{now()} internal error\n{text}\n")
        where = f"details in {log}"
    except OSError:
        where = "no details: logs/gate.log is not writable"
    message = f"internal error: {type(error).__name__}: {one_line(error)}; {where}"
    notices.say(message)
    return GateError(message, kind=ErrorKind.INTERNAL)


def _internal_failure(config: Config, error: GateError, publisher: Publisher) -> GateOutcome:
    """The gate broke after deciding: a manifest with the error only."""
    return _error_only(error, config.name, config.output_dir, publisher)


def _error_only(
    error: GateError, name: str, output_dir: Path, publisher: Publisher
) -> GateOutcome:
    document = _error_manifest(error, name, output_dir)
    try:
        ensure_writable(output_dir)
        path: Path | None = manifest.write(document, output_dir)
    except GateError:
        path = None
    try:
        document.update(publisher.finished(document, path))
    except Exception as failure:  # publishing never changes the verdict
        notices.warning(f"reporting failed: {one_line(failure)}")
    return GateOutcome(document, path, EXIT_ERROR)


def _error_manifest(error: GateError, name: str, output_dir: Path) -> dict[str, Any]:
    """The manifest of a gate that ended in `error` and recorded nothing else."""
    return {
        **manifest.header(name, now(), now()),
        "verdict": verdict.ERROR,
        "reasons": [verdict.reason(error.kind, error.message)],
        "output_dir": str(output_dir),
        "config": {},
        "runs": [],
        "comparison": empty_comparison(ToleranceConfig()),
        "nondeterministic_ops": [],
        "cost": None,
    }


def check_baseline(config: Config) -> None:
    """Fail before any GPU time is spent when the baseline cannot be read."""
    if config.baseline is not None:
        manifest.read_document(config.baseline, kind=ErrorKind.BASELINE)


def ensure_writable(output_dir: Path) -> None:
    """Create the output directory and the subdirectories the gate writes into, and prove a file
    can be written in each, before any run starts."""
    for directory in (output_dir, *(output_dir / name for name in OUTPUT_SUBDIRS)):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe_file = directory / ".write-test"
            probe_file.write_bytes(b"")
            probe_file.unlink()
        except OSError as error:
            reason = error.strerror or str(error)
            what = "output directory" if directory == output_dir else "directory"
            raise GateError(
                f"{what} {directory} is not writable: {reason}", kind=ErrorKind.OUTPUT_DIR
            ) from None


def execute_runs(
    config: Config, launcher: Launcher, state: GateState, sink_for: SinkFactory
) -> None:
    """Deterministic runs A, B, … (B onwards fail-fast against A), the runs that vary one factor
    of the environment each (`vary`), then the cost run and the noise floor's two default-mode
    runs."""
    for index in range(config.runs):
        name = chr(ord("A") + index)
        reference = None
        # Fail-fast compares bits as it goes; under a numeric tolerance the artifacts decide.
        if index > 0 and config.fail_fast and config.tolerance.bitwise:
            # Each rank of B is matched with run A's trajectory of the same rank.
            first = state.records[0]
            reference = fail_fast.Reference.of({0: first.trajectory, **first.other_ranks})
        spec = training_run.build_spec(config, launcher, name, "deterministic",
                                       hash_seed=training_run.RUN_A_HASH_SEED + index)
        if index == 0:
            resume_run.record_states(config, spec)
        record = _execute(config, launcher, spec, sink_for, reference)
        state.records.append(record)
        _check_run(record, state, config.timeout)
        evidence.check_run(config, record)
        if state.strict_stop or record.stopped == training_run.DIVERGENCE:
            return
    if config.vary.factors:
        state.vary = vary_runs.run_all(
            config, launcher, state.records,
            lambda spec, reference: _execute(config, launcher, spec, sink_for, reference))
    if not config.cost.enabled:
        return
    planned: list[tuple[str, Mode, int]] = []
    run_a = state.records[0]
    steps = _cost_run_steps(config, run_a)
    design = _shortest_design(config, run_a)
    if steps < cost_estimate.fewest_steps(design):
        state.cost_not_started = steps  # it could not time enough block pairs for a figure
        state.cost_design = design
    else:
        planned.append((training_run.COST_RUN_NAME, "cost", cost_plan.max_steps(config.cost)))
    if config.cost.noise_floor:
        planned += [(name, "default", config.cost.steps)
                    for name in training_run.NOISE_FLOOR_RUN_NAMES]
    for name, mode, max_steps in planned:
        spec = training_run.build_spec(config, launcher, name, mode, max_steps=max_steps)
        record = _execute(config, launcher, spec, sink_for)
        state.records.append(record)
        _check_run(record, state, config.timeout)


def _cost_run_steps(config: Config, run_a: training_run.RunRecord) -> int:
    """How long the cost run would train: as run A did (it trains as written), or up to
    `cost.steps`."""
    steps = len(run_a.trajectory)
    return min(steps, config.cost.steps) if config.cost.steps else steps


def _shortest_design(config: Config, run_a: training_run.RunRecord) -> cost_plan.CostPlan:
    """The cost run's plan with the shortest blocks the probe could give it, from run A's step
    times; the probe lengthens no block under a cap on the steps or in a process group."""
    design = cost_plan.plan(config.cost)
    times = [entry["time"] for entry in run_a.trajectory
             if isinstance(entry.get("time"), int | float)]
    if config.cost.steps or run_a.other_ranks or not times:
        return design
    return cost_estimate.shortest_blocks(design, statistics.median(times))


def _execute(
    config: Config, launcher: Launcher, spec: RunSpec, sink_for: SinkFactory,
    reference: fail_fast.Reference | None = None,
) -> training_run.RunRecord:
    try:
        return training_run.execute(launcher, spec, sink_for(spec.name), list(config.artifacts),
                                    reference)
    except GateError as error:
        if error.kind != ErrorKind.CANCELLED:
            raise
        raise GateError(
            f"{error.message} during run {spec.name} (step {_last_step(spec)})",
            kind=ErrorKind.CANCELLED,
        ) from None


def _last_step(spec: RunSpec) -> int:
    """The last optimizer step the probe recorded in the run (0 before the first)."""
    try:
        trajectory = read_trajectory(spec.run_dir)
    except (OSError, GateError):  # a link in its records: the cancel is what is said here
        return 0
    if not trajectory:
        return 0
    step = trajectory[-1].get("step")
    return step if isinstance(step, int) else len(trajectory)


def _check_run(record: training_run.RunRecord, state: GateState, timeout: float | None) -> None:
    """Raise for a run that timed out, crashed or left configured globs unmatched."""
    label = f"run {record.name} ({record.mode})"
    failure = training_run.run_failure(record, timeout)
    if failure is not None:
        if failure.kind == ErrorKind.RUN_FAILED and any(
                alert.get("kind") == "strict_error" for alert in record.alerts):
            state.strict_stop = True
            return
        raise failure
    status = record.probe_status or {}
    if status.get("probe") == "failed":
        errors = "; ".join(status.get("errors", [])) or "no detail"
        raise GateError(f"the probe failed in {label}: {errors}", kind=ErrorKind.PROBE_FAILED)
    if record.unmatched_globs and record.stopped is None:
        pattern = record.unmatched_globs[0]
        raise GateError(
            f"artifact glob {pattern!r} matched no file in {label}"
            " (looked in the run directory and the working directory);"
            f" {written_nearest(record.run_dir, pattern)}",
            kind=ErrorKind.NO_ARTIFACTS,
        )


def _write(document: dict[str, Any], output_dir: Path, state: GateState) -> Path | None:
    """Write the verdict's manifest. When it cannot be (it fails its schema, the write fails),
    that is the error (exit 2) and a manifest with that error alone takes its place, in
    `document` too: never a verdict without a record."""
    try:
        return manifest.write(document, output_dir)
    except GateError as failure:
        state.error = GateError(f"{failure.message} (as built: {INVALID_MANIFEST_NAME})",
                                kind=failure.kind)
    except OSError as failure:
        state.error = GateError(f"{manifest.MANIFEST_NAME} was not written: {one_line(failure)}",
                                kind=ErrorKind.OUTPUT_DIR)
    errored = _error_manifest(state.error, document["gate"], output_dir)
    document.clear()
    document.update(errored)
    try:
        return manifest.write(document, output_dir)
    except (GateError, OSError) as failure:
        notices.error(f"{state.error.message}; the error manifest was not written either:"
                      f" {one_line(failure)}")
        return None


def _rewrite(document: dict[str, Any], output_dir: Path) -> Path | None:
    """Add the publishing sections; the first manifest stays if that fails."""
    try:
        return manifest.write(document, output_dir)
    except (GateError, OSError) as error:
        notices.warning(f"manifest kept without reporting sections: {error}")
        return None

