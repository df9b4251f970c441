"""Run R, the resume check (docs/resume.md): a run like A, stopped by the probe after its first
checkpoint written at or after `resume.after`, then resumed from that checkpoint by the resume
command in the same working copy; its artifacts are collected once, at the end.

Runs A and R record the state each step begins with (the probe's RESUME_STATE_FILE), which
names the state a resume did not restore (compare/missing_state.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro_gate import probe
from repro_gate.compare.document import Comparison, ResumeComparison
from repro_gate.compare.missing_state import Records
from repro_gate.compare.resume import ResumeEvidence, ResumePoint, compare_resume, not_run
from repro_gate.config import Config, ResumeConfig
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate import training_run
from repro_gate.gate.training_run import RunRecord
from repro_gate.launch import progress
from repro_gate.launch.base import Launcher, LineSink, RunOutcome, RunSpec
from repro_gate.launch.shell import shell_argv

RESUME_RUN_NAME = "R"
PURPOSE = "resume"
RESUMED_LOG = "R-resumed.log"  # the resumed process's output, beside R.log (its first process)
# The probe's stop reason in the first process: it stopped at the resume point, as asked.
STOPPED_AT_RESUME_POINT = "resume_point"
NOT_AGREED = "runs A and B did not agree, so the resume was not checked"
STOPPED_EARLIER = "the gate stopped before run R"
STRICT_STOP = ("a nondeterministic op stopped the runs (determinism: strict), so the resume was"
               " not checked")

SinkFor = Callable[[str], LineSink]


def record_states(config: Config, spec: RunSpec) -> None:
    """Run A (and R) record the state each step begins with, only when `resume` is set."""
    if config.resume is not None:
        spec.env[probe.ENV_RESUME_RECORDS] = "1"


def unchecked(config: Config, agreed: bool, strict_stop: bool = False
              ) -> ResumeComparison | None:
    """`comparison.resume` of a gate that did not run R: None when `resume` is not set."""
    if config.resume is None:
        return None
    if strict_stop:
        return not_run(STRICT_STOP)
    return not_run(STOPPED_EARLIER if agreed else NOT_AGREED)


def check(config: Config, launcher: Launcher, run_a: RunRecord, comparison: Comparison,
          sink_for: SinkFor) -> RunRecord:
    """Run R, stop it at its resume point, resume it, and compare it with run A into
    `comparison["resume"]`; the record of run R, for `runs[]`."""
    assert config.resume is not None
    spec = _spec(config, launcher, config.resume.after)
    sink = sink_for(spec.name)
    first = _run(launcher, spec, sink)
    point = _resume_point(spec, first, config.resume.after)
    resumed = resumed_spec(spec, config, launcher, point)
    second = _run(launcher, resumed, sink)
    outcome = RunOutcome(second.exit_code, first.wall_seconds + second.wall_seconds,
                         second.timed_out, {**first.details, **second.details})
    record = training_run.gather(launcher, spec, outcome, list(config.artifacts))
    record.purpose = PURPOSE
    if record.stopped == STOPPED_AT_RESUME_POINT:
        record.stopped = None  # the first process's stop; the resumed one ran to its end
    evidence = ResumeEvidence(run_a.side(), record.side(), states(run_a.run_dir),
                              states(record.run_dir))
    comparison["resume"] = compare_resume(evidence, point, config.tolerance, config.compare)
    return record


def _spec(config: Config, launcher: Launcher, after: int) -> RunSpec:
    """Run R's first process: like run A, stopped at its resume point (then compared with A)."""
    spec = training_run.build_spec(config, launcher, RESUME_RUN_NAME, "deterministic")
    record_states(config, spec)
    spec.env[probe.ENV_RESUME_AFTER] = str(after)
    return spec


def resumed_spec(spec: RunSpec, config: Config, launcher: Launcher,
                 point: ResumePoint) -> RunSpec:
    """The resume command's spec: the same run directory and working copy, its own log."""
    env = {name: value for name, value in spec.env.items() if name != probe.ENV_RESUME_AFTER}
    env[probe.ENV_RESUME_CHECKPOINT] = point.checkpoint
    env[probe.ENV_RESUME_STEP] = str(point.step)
    return dataclasses.replace(spec, argv=resume_argv(config, launcher), env=env,
                               log_path=spec.log_path.with_name(RESUMED_LOG))


def resume_argv(config: Config, launcher: Launcher) -> list[str]:
    """`resume.command` through the shell; unset, the training's own command."""
    resume: ResumeConfig | None = config.resume
    if resume is None or resume.command is None:
        return training_run.command_argv(config, launcher)[0]
    return shell_argv(resume.command)


def _run(launcher: Launcher, spec: RunSpec, sink: LineSink) -> RunOutcome:
    started = time.time()
    with progress.watching_run(spec, sink):
        outcome = launcher.run(spec, sink)
    label = f"run {spec.name}" + (" (resumed)" if spec.log_path.name == RESUMED_LOG else "")
    if outcome.timed_out:
        raise GateError(f"{label} timed out after {outcome.wall_seconds:.1f} s and was killed"
                        f" (log: {spec.log_path})", kind=ErrorKind.TIMEOUT)
    if outcome.exit_code not in (0, probe.STOP_EXIT_CODE) and not _stopped(spec.run_dir, started):
        raise GateError(f"{label} exited with code {outcome.exit_code} (log: {spec.log_path})",
                        kind=ErrorKind.RUN_FAILED, detail=training_run.log_tail(spec.log_path))
    return outcome


def _stopped(run_dir: Path, since: float) -> bool:
    """Whether the probe stopped some rank of this process on purpose (torchrun then exits 1
    itself). The resumed process shares the run folder: the first process's stop, written
    before `since`, says nothing of a resume command that crashed before the probe loaded."""
    ranks = probe.recorded_ranks(run_dir) or [0]
    for rank in ranks:
        path = probe.probe_output_dir(run_dir) / probe.rank_file(probe.STATUS_FILE, rank)
        status = probe.read_json(run_dir, probe.STATUS_FILE, rank)
        if isinstance(status, dict) and status.get("stopped") and path.stat().st_mtime >= since:
            return True
    return False


def _resume_point(spec: RunSpec, outcome: RunOutcome, after: int) -> ResumePoint:
    """The checkpoint R's first process stopped after; the error `no_checkpoint` when none."""
    point = probe.read_json(spec.run_dir, probe.RESUME_POINT_FILE)
    if (not isinstance(point, dict) or not isinstance(point.get("step"), int)
            or not isinstance(point.get("checkpoint"), str)):
        raise GateError(
            f"run {spec.name} wrote no checkpoint at or after step {after} (resume.after) before"
            f" it ended with code {outcome.exit_code}: the probe saw no torch.save, safetensors"
            f" or torch.distributed.checkpoint write to resume from (log: {spec.log_path})",
            kind=ErrorKind.NO_CHECKPOINT)
    return ResumePoint(point["step"], point["checkpoint"])


def states(run_dir: Path) -> Records:
    """Every rank's state records (RESUME_STATE_FILE), by rank; a partial last line is left out."""
    records: Records = {}
    for rank in probe.recorded_ranks(run_dir):
        data = probe.read_file(run_dir, probe.rank_file(probe.RESUME_STATE_FILE, rank))
        records[rank] = _lines(data or b"")
    return records


def _lines(data: bytes) -> list[dict[str, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(value, dict):
            found.append(value)
    return found
