"""The culprit search's runs of `repro-gate upgrade`, in environments built from locks.

The culprit search asks `Trials` about a subset of the changes: one
deterministic run in the baseline's environment with exactly those packages moved, failing fast
against the baseline's run A (bitwise, or on the loss leaving the tolerance). A confirmation
run of a culprit group runs to the end, so that its artifacts can be compared too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro_gate.compare.document import Comparison
from repro_gate.compare.run_pair import RunSide, compare_runs
from repro_gate.compare.status import WITHIN_TOLERANCE, Numerics
from repro_gate.compare.tolerance import Tolerance
from repro_gate.config import Config, ToleranceConfig
from repro_gate.environments import BuildEnvironment, Environment, LocalEnvironments, Lock
from repro_gate.environments.launcher import InEnvironment, python_environment
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate import training_run, verdict
from repro_gate.gate.fail_fast import Reference
from repro_gate.launch import progress
from repro_gate.launch.base import Launcher, LineSink
from repro_gate.upgrade import apply_changes
from repro_gate.upgrade.culprits import Outcome

SinkFactory = Callable[[str], LineSink]
BASELINE_SIDE = "baseline"
CANDIDATE_SIDE = "candidate"
# Building an environment that does not resolve or install answers "skip", not an error; an
# index that cannot be reached (INDEX_UNREACHABLE) says nothing about the subset: it ends the
# search with that error.
SKIPPED_KINDS = frozenset({ErrorKind.LOCK_UNRESOLVABLE, ErrorKind.ENVIRONMENT})


def side(record: training_run.RunRecord, name: str) -> RunSide:
    """`record` as one side of a comparison, under another name (both gates have a run A)."""
    return dataclasses.replace(record.side(), name=name)


def built(build: BuildEnvironment, pins: dict[str, str], what: str,
          sink: LineSink) -> Environment:
    """The environment of `pins`, with status lines while it builds (a cached one is quick):
    packages installed so far and their bytes, where the environment is on this host."""
    so_far = None
    if isinstance(build, LocalEnvironments):
        so_far = functools.partial(installed_so_far, build.directory(pins))
    with progress.watching_build(f"{what} ({len(pins)} pinned packages)", sink, so_far):
        return build(pins)


def installed_so_far(directory: Path) -> str:
    """`2 packages installed, 1.4 MB`: how far the build of the environment in `directory`
    got (the base's inherited packages are not in it)."""
    packages, size = 0, 0
    for root, subdirs, files in os.walk(directory):
        packages += sum(1 for name in subdirs if name.endswith(".dist-info"))
        for name in files:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(root, name)).st_size
    return f"{packages} package{'' if packages == 1 else 's'} installed, {size / 1e6:.1f} MB"


def numerics_status(comparison: Comparison, tolerance: ToleranceConfig,
                    loss_step: int | None) -> Numerics:
    """same | within_tolerance | changed, for a comparison of the baseline with another run.

    Under a tolerance the artifacts and the losses decide; bitwise, any difference does.
    """
    if verdict.failures(comparison, []) or loss_step is not None:
        return Numerics.CHANGED
    within = any(item["status"] == WITHIN_TOLERANCE for item in comparison["artifacts"])
    if within or comparison.get("first_divergence"):
        return Numerics.WITHIN_TOLERANCE
    return Numerics.SAME


def first_loss_outside(a: RunSide, b: RunSide, tolerance: ToleranceConfig) -> int | None:
    """The first step whose loss leaves the tolerance (compare/tolerance.py: NaN agrees with
    NaN); None bitwise: the trajectory comparison decides there."""
    if tolerance.bitwise:
        return None
    rule = Tolerance(atol=tolerance.atol, rtol=tolerance.rtol)
    losses = {entry.get("step"): entry.get("loss") for entry in a.trajectory}
    for entry in b.trajectory:
        expected, seen = losses.get(entry.get("step")), entry.get("loss")
        if not isinstance(expected, str) or not isinstance(seen, str):
            continue
        try:
            x, y = float.fromhex(expected), float.fromhex(seen)
        except ValueError:
            continue
        if not rule.allows(x, y):
            return int(entry["step"])
    return None


@dataclass
class TrialRun:
    """What one run of the search, or a confirmation run, showed."""

    packages: tuple[str, ...]
    outcome: Outcome
    record: training_run.RunRecord | None = None
    comparison: Comparison | None = None
    step: int | None = None  # the first divergent step
    note: str | None = None  # why it was skipped


@dataclass
class Trials:
    """The culprit search's oracle: a subset of the changes -> same, changed or skip."""

    config: Config  # output_dir: where the trial runs go
    launcher: Launcher
    build: BuildEnvironment
    baseline: Lock
    candidate: Lock
    reference: training_run.RunRecord  # the baseline gate's run A
    tolerance: ToleranceConfig
    sink_for: SinkFactory
    done: list[TrialRun] = field(default_factory=list)

    def __call__(self, packages: tuple[str, ...]) -> Outcome:
        trial = self.run(packages, name=f"T{len(self.done) + 1}", fail_fast=True)
        self.done.append(trial)
        return trial.outcome

    def confirm(self, packages: tuple[str, ...], number: int) -> TrialRun:
        """A run of the baseline with `packages` moved, to its end, compared with run A."""
        return self.run(packages, name=f"C{number}", fail_fast=False)

    def run(self, packages: tuple[str, ...], name: str, fail_fast: bool) -> TrialRun:
        pins = apply_changes(self.baseline, self.candidate, packages)
        try:
            environment = built(self.build, pins, f"the environment of run {name}",
                                self.sink_for(f"{name} environment"))
        except GateError as error:
            if error.kind not in SKIPPED_KINDS:
                raise
            return TrialRun(packages, Outcome.SKIP, note=error.message)
        launcher = InEnvironment(self.launcher, python_environment(environment))
        record = self._execute(launcher, name, fail_fast)
        if record.timed_out or not record.ended_cleanly:
            what = "timed out" if record.timed_out else f"exited with code {record.exit_code}"
            return TrialRun(packages, Outcome.SKIP, record,
                         note=f"the training {what} (log: {record.log_path})")
        return self._judge(packages, record)

    def _execute(self, launcher: Launcher, name: str, fail_fast: bool) -> training_run.RunRecord:
        reference = None
        if fail_fast:  # rank 0's steps; under a tolerance, their losses only
            loss_tolerance = None if self.tolerance.bitwise else Tolerance(
                atol=self.tolerance.atol, rtol=self.tolerance.rtol)
            reference = Reference.of({0: self.reference.trajectory}, loss_tolerance)
        spec = training_run.build_spec(self.config, launcher, name, "deterministic")
        return training_run.execute(launcher, spec, self.sink_for(name),
                                    list(self.config.artifacts), reference)

    def _judge(self, packages: tuple[str, ...], record: training_run.RunRecord) -> TrialRun:
        baseline = side(self.reference, BASELINE_SIDE)
        other = side(record, record.name)
        comparison = compare_runs([baseline, other], self.tolerance, self.config.compare)
        divergence = comparison["first_divergence"]
        loss_step = first_loss_outside(baseline, other, self.tolerance)
        if record.divergence is not None:  # fail-fast stopped it there
            return TrialRun(packages, Outcome.CHANGED, record, comparison,
                            record.divergence.step)
        status = numerics_status(comparison, self.tolerance, loss_step)
        if status == Numerics.CHANGED:
            step = loss_step or (divergence["step"] if divergence else None)
            return TrialRun(packages, Outcome.CHANGED, record, comparison, step)
        return TrialRun(packages, Outcome.SAME, record, comparison)
