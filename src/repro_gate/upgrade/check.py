"""`repro-gate upgrade`: does moving from the baseline lock to a candidate lock change the
training's numerics, is it still reproducible, and which package did it.

    locks       the baseline lock; the candidate computed by uv or given; the change set
    environments  both built (or found in the cache) before the first run
    gates       the ordinary gate in the baseline's environment, then in the candidate's; a
                result whose inputs did not change is read back from the cache
    numerics    the baseline's run A against the candidate's run A (upgrade.tolerance)
    culprits    when the numerics changed: the culprit search (upgrade/culprits.py), each
                trial a fail-fast run against the baseline's run A; one confirmation run per
                culprit group, compared to the end
    record      upgrade.json, validated and atomic; then the publisher

Every error becomes the verdict `error` with a one-line reason, and everything written before
it (manifests, logs, the candidate lock) stays. The inner gates publish nothing.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate import notices
from repro_gate.compare.run_pair import check_something_compared, compare_runs
from repro_gate.compare.status import Numerics
from repro_gate.config import Config, ToleranceConfig, VaryConfig
from repro_gate.environments import (
    BuildEnvironment,
    find_lock,
    read_lock,
)
from repro_gate.environments.builders import builder_for
from repro_gate.environments.launcher import InEnvironment, python_environment
from repro_gate.errors import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_PASS,
    ErrorKind,
    GateError,
    one_line,
)
from repro_gate.gate.pipeline import (
    GateOutcome,
    LauncherFactory,
    SinkFactory,
    ensure_writable,
    internal_error,
    run_gate,
)
from repro_gate.gate.record import now
from repro_gate.gate.training_run import RunRecord
from repro_gate.golden.candidate import write_candidate
from repro_gate.golden.document import RunData
from repro_gate.golden.document import build as build_golden
from repro_gate.launch import cancel
from repro_gate.launch.base import Launcher
from repro_gate.manifest.store import write_text_atomic
from repro_gate.manifest.upgrade_document import UPGRADE_FILE, UpgradeVerdict, write_upgrade
from repro_gate.publish import Publisher
from repro_gate.render import markdown_upgrade
from repro_gate.upgrade import UpgradeRequest, change_set, compute_candidate, given_candidate
from repro_gate.upgrade import record as upgrade_record
from repro_gate.upgrade.culprits import find_culprits
from repro_gate.upgrade.gate_cache import GATES_SUBDIR, GateCache, gate_key, inputs_sha256
from repro_gate.upgrade.record import UpgradeRecord
from repro_gate.upgrade.state import Role, UpgradeState
from repro_gate.upgrade.trials import (
    BASELINE_SIDE,
    CANDIDATE_SIDE,
    Trials,
    built,
    first_loss_outside,
    numerics_status,
    side,
)

EXIT_CODES = {UpgradeVerdict.SAME: EXIT_PASS, UpgradeVerdict.CHANGED: EXIT_FAIL,
              UpgradeVerdict.NOT_REPRODUCIBLE: EXIT_FAIL, UpgradeVerdict.ERROR: EXIT_ERROR}
UPGRADE_MARKDOWN = "upgrade.md"
UPGRADE_SUBDIR = "upgrade"  # in the output directory: both gates, the trials, the candidate


@dataclass(frozen=True)
class CandidateSource:
    """Where the candidate lock comes from: a file, or uv upgrading the baseline."""

    lock: Path | None = None  # given (--candidate-lock)
    request: UpgradeRequest | None = None  # computed (--upgrade / --upgrade-package)


@dataclass(frozen=True)
class UpgradeOptions:
    candidate: CandidateSource
    baseline_lock: Path | None = None  # None: config.upgrade.lock, else found in the workdir
    write_lock: bool = False  # copy the candidate over the project's lock (not on error)


@dataclass
class UpgradeOutcome:
    document: UpgradeRecord
    path: Path | None
    exit_code: int


class SilentPublisher:
    """The inner gates' publisher: the upgrade report is what gets published."""

    def started(self) -> None:
        return None

    def finished(self, document: Mapping[str, Any], manifest_path: Path | None
                 ) -> dict[str, Any]:
        return {}


def run_upgrade(config: Config, options: UpgradeOptions, open_launcher: LauncherFactory,
                publisher: Publisher, sink_for: SinkFactory) -> UpgradeOutcome:
    """The whole upgrade check; never raises a GateError but for an unwritable output dir."""
    ensure_writable(config.output_dir)
    state = UpgradeState(started_at=now(), started=time.monotonic())
    try:
        _check(config, options, open_launcher, publisher, sink_for, state)
    except GateError as error:
        state.error = error
    except Exception as error:  # the one boundary for the unexpected
        state.error = internal_error(error, config.output_dir)
    cancel.ignore_from_now()
    document, path = _record(config, state)
    _publish(document, path, publisher)
    if path is not None:
        path = _rewrite(document, config.output_dir) or path
    if options.write_lock and document["verdict"] != "error" and state.candidate_kept:
        _write_lock(state)
    return UpgradeOutcome(document, path, EXIT_CODES[document["verdict"]])


def configuration_error(error: GateError, workdir: Path, output_dir: Path,
                        publisher: Publisher) -> UpgradeOutcome:
    """The record of a check that could not start (a bad flag, input or config file): an
    upgrade.json with the verdict `error`, so that CI still finds one and the step's outputs
    say why."""
    ensure_writable(output_dir)
    state = UpgradeState(started_at=now(), started=time.monotonic(), error=error)
    config = Config(workdir=workdir, output_dir=output_dir)
    document, path = _record(config, state)
    _publish(document, path, publisher)
    return UpgradeOutcome(document, path, EXIT_ERROR)


def _publish(document: UpgradeRecord, path: Path | None, publisher: Publisher) -> None:
    """Publish the record; GitHub's `reporting` section, the one an upgrade gets, joins it."""
    sections = publisher.finished(document, path)
    if "reporting" in sections:
        document["reporting"] = sections["reporting"]


def _check(config: Config, options: UpgradeOptions, open_launcher: LauncherFactory,
           publisher: Publisher, sink_for: SinkFactory, state: UpgradeState) -> None:
    work = config.output_dir / UPGRADE_SUBDIR
    _read_locks(config, options, work, state)
    publisher.started()
    if not state.applicable_names():
        return
    build = builder_for(config, state.baseline_lock().sources.merged(
        state.candidate_lock().sources))
    launcher = open_launcher(config)
    # Both environments before the first run: a candidate that cannot be installed is an error
    # in seconds, not after the baseline's whole gate.
    state.environments["baseline"] = built(build, state.baseline_lock().pins(),
                                           "the baseline environment",
                                           sink_for("baseline environment"))
    state.environments["candidate"] = built(build, state.candidate_lock().pins(),
                                            "the candidate environment",
                                            sink_for("candidate environment"))
    inputs = inputs_sha256(config)
    state.gates["baseline"] = _gate(config, "baseline", launcher, state, sink_for, inputs)
    _require_baseline_reproducible(state.gates["baseline"])
    state.gates["candidate"] = _gate(config, "candidate", launcher, state, sink_for, inputs)
    if state.gates["candidate"].exit_code == EXIT_ERROR:
        reason = state.gates["candidate"].manifest["reasons"][0]
        raise GateError(f"the gate in the candidate environment: {reason['message']}",
                        kind=ErrorKind(reason["code"]))
    if not reproducible(state.gates["candidate"].manifest):
        return
    _write_candidate_golden(config, state.gates["candidate"])
    _compare_numerics(config, state)
    if state.numerics_status == Numerics.CHANGED:
        _search(config, launcher, build, state, sink_for)


def _read_locks(config: Config, options: UpgradeOptions, work: Path,
                state: UpgradeState) -> None:
    lock_path = options.baseline_lock or find_lock(config.workdir, config.upgrade.lock)
    source = options.candidate
    # The lock's relative paths start at the project: the workspace lock's directory, also
    # for a base commit's copy of it (whose candidate is the workspace's lock).
    project = (source.lock if options.baseline_lock and source.lock else lock_path).parent
    state.baseline = read_lock(lock_path, project=project)
    if source.lock is not None:
        state.candidate = given_candidate(source.lock, state.baseline, project)
        state.candidate_source = "given"
    else:
        state.request = source.request or UpgradeRequest()
        scratch = work / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        state.candidate = compute_candidate(state.baseline, state.request, scratch,
                                            project=project)
    kept = work / f"candidate.{state.baseline.path.name}"
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(state.candidate.path, kept)
    state.candidate_kept = kept
    state.changes = change_set(state.baseline, state.candidate)


def _gate(config: Config, role: Role, launcher_base: Launcher, state: UpgradeState,
          sink_for: SinkFactory, inputs: str) -> GateOutcome:
    """The gate in the environment of `role`: read back from the cache when everything that
    decides it is unchanged (upgrade/gate_cache.py), else run, and cached when reproducible."""
    # The inner gates compare no golden trajectory (an empty path: the check compares its two),
    # never resume (the resume check is `check`'s) and vary nothing (`check`'s too).
    inner = dataclasses.replace(config, output_dir=config.output_dir / UPGRADE_SUBDIR / role,
                                golden=dataclasses.replace(config.golden, path=""), resume=None,
                                vary=VaryConfig())
    cache = GateCache(config.upgrade.cache_path / GATES_SUBDIR)
    key = gate_key(inputs, state.environments[role])
    state.gate_keys[role] = key
    cached = cache.load(key, inner.output_dir, config)
    if cached is not None:
        state.reused_gates.add(role)
        notices.say(f"the {role} gate: reused its result from the cache (stored"
                    f" {cached.stored_at}; environment, code, command, configuration and data"
                    f" unchanged, key {key[:12]})")
        return cached.outcome
    environment = python_environment(state.environments[role])
    outcome = run_gate(inner, lambda _: InEnvironment(launcher_base, environment),
                       SilentPublisher(), lambda name: sink_for(f"{role} {name}"))
    cancel.listen_again()  # the inner gate stopped listening once its verdict was decided
    if (outcome.exit_code != EXIT_ERROR and outcome.manifest_path is not None
            and reproducible(outcome.manifest)):
        cache.store(key, outcome, inner.output_dir, now())
    return outcome


def reproducible(manifest: dict[str, Any]) -> bool:
    """Passed, or failed on the cost budget alone."""
    codes = {reason["code"] for reason in manifest["reasons"]}
    return manifest["verdict"] == "pass" or codes == {"cost_over_budget"}


def _require_baseline_reproducible(outcome: GateOutcome) -> None:
    reasons = outcome.manifest["reasons"]
    if outcome.exit_code == EXIT_ERROR:
        raise GateError(f"the gate in the baseline environment: {reasons[0]['message']}",
                        kind=ErrorKind(reasons[0]["code"]))
    if not reproducible(outcome.manifest):
        raise GateError(
            f"the baseline is not reproducible ({reasons[0]['message']}): fix that first"
            " (repro-gate check), then compare an upgrade with it",
            kind=ErrorKind.BASELINE_NOT_REPRODUCIBLE)


def tolerance_of(config: Config) -> ToleranceConfig:
    return config.upgrade.tolerance or config.tolerance


def _compare_numerics(config: Config, state: UpgradeState) -> None:
    tolerance = tolerance_of(config)
    baseline = side(_run_a(state.gates["baseline"]), BASELINE_SIDE)
    candidate = side(_run_a(state.gates["candidate"]), CANDIDATE_SIDE)
    state.comparison = compare_runs([baseline, candidate], tolerance, config.compare)
    check_something_compared(state.comparison)  # never "the same" on no evidence
    loss_step = first_loss_outside(baseline, candidate, tolerance)
    state.numerics_status = numerics_status(state.comparison, tolerance, loss_step)


def _write_candidate_golden(config: Config, outcome: GateOutcome) -> None:
    """The candidate's golden trajectory beside upgrade.json (`golden/<class>.json`), for a
    lock-bump pull request to carry."""
    run = _run_a(outcome)
    data = RunData(run.trajectory, outcome.manifest.get("fingerprint") or {},
                   [(a.rel_path, a.path) for a in run.artifacts], config.name)
    try:
        golden = build_golden(data, now())
    except (GateError, OSError) as error:
        notices.warning(f"the candidate golden file was not written: {one_line(error)}")
        return
    write_candidate(golden, config.output_dir)


def _run_a(outcome: GateOutcome) -> RunRecord:
    return next(record for record in outcome.records if record.mode == "deterministic")


def _search(config: Config, launcher: Launcher, build: BuildEnvironment, state: UpgradeState,
            sink_for: SinkFactory) -> None:
    trials_config = dataclasses.replace(
        config, output_dir=config.output_dir / UPGRADE_SUBDIR / "trials", resume=None)
    ensure_writable(trials_config.output_dir)
    trials = Trials(trials_config, launcher, build, state.baseline_lock(),
                    state.candidate_lock(), _run_a(state.gates["baseline"]),
                    tolerance_of(config), lambda name: sink_for(f"trial {name}"))
    state.trials = trials
    state.search = find_culprits(state.applicable_names(), trials,
                                 config.upgrade.max_bisect_runs)
    for number, group in enumerate(state.search.groups, start=1):
        state.confirmations.append(trials.confirm(group, number))


def _record(config: Config, state: UpgradeState) -> tuple[UpgradeRecord, Path | None]:
    """Write upgrade.json and upgrade.md for the verdict. When either cannot be written (a
    record that fails its schema, a write that fails), that is the error (exit 2), recorded in
    an upgrade.json in their place: the whole record with the verdict `error`, else the error
    alone. Never a verdict with no record."""
    document = upgrade_record.assemble(config, state)
    try:
        return document, _write_both(document, config.output_dir)
    except (GateError, OSError) as failure:
        state.error = _not_recorded(failure, state.error)
    error_only = UpgradeState(state.started_at, state.started, error=state.error)
    for document in (upgrade_record.assemble(config, state),
                     upgrade_record.assemble(config, error_only)):
        try:
            path = write_upgrade(document, config.output_dir)
        except (GateError, OSError) as failure:
            last = failure
            continue
        _write_markdown(document, config.output_dir)
        return document, path
    notices.error(f"{state.error.message}; the error record was not written either:"
                  f" {one_line(last)}")
    return document, None


def _write_both(document: UpgradeRecord, output_dir: Path) -> Path:
    path = write_upgrade(document, output_dir)
    write_text_atomic(output_dir / UPGRADE_MARKDOWN, markdown_upgrade.report(document))
    return path


def _not_recorded(failure: GateError | OSError, earlier: GateError | None) -> GateError:
    """The error of a record that could not be written (after an earlier error, both)."""
    if isinstance(failure, GateError):
        message, kind = failure.message, failure.kind
    else:
        target = failure.filename2 or failure.filename
        name = Path(target).name if target else UPGRADE_FILE
        message = f"the upgrade report was not written ({name}): {one_line(failure)}"
        kind = ErrorKind.OUTPUT_DIR
    if earlier is not None:
        message += f"; before that: {earlier.message}"
    return GateError(message, kind=kind)


def _rewrite(document: UpgradeRecord, output_dir: Path) -> Path | None:
    """Add the publishing sections; the first upgrade.json stays if that fails."""
    try:
        return write_upgrade(document, output_dir)
    except (GateError, OSError) as error:
        notices.warning(f"{UPGRADE_FILE} kept without reporting sections: {one_line(error)}")
        return None


def _write_markdown(document: UpgradeRecord, output_dir: Path) -> None:
    """upgrade.md of an error already recorded in upgrade.json: a warning if it fails."""
    try:
        write_text_atomic(output_dir / UPGRADE_MARKDOWN, markdown_upgrade.report(document))
    except OSError as error:
        notices.warning(f"{UPGRADE_MARKDOWN} not written: {one_line(error)}")


def _write_lock(state: UpgradeState) -> None:
    """The candidate lock over the project's lock, for the weekly pull request."""
    assert state.candidate_kept is not None and state.baseline is not None
    shutil.copyfile(state.candidate_kept, state.baseline.path)

