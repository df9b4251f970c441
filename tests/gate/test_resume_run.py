"""Run R, the resume check: its two processes' specs, their outcomes (played by a launcher that
writes the probe's files), and the comparison with run A."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from repro_gate import probe
from repro_gate.compare.resume import ResumePoint
from repro_gate.compare.run_pair import empty_comparison
from repro_gate.compare.status import Resume
from repro_gate.config import Config, ResumeConfig, ToleranceConfig
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.resume_run import (
    NOT_AGREED,
    RESUMED_LOG,
    STOPPED_EARLIER,
    STRICT_STOP,
    check,
    record_states,
    resume_argv,
    resumed_spec,
    states,
    unchecked,
)
from repro_gate.gate.training_run import RunRecord, build_spec
from repro_gate.launch.base import LineSink, RunOutcome, RunSpec
from repro_gate.launch.shell import shell_argv

Process = Callable[[RunSpec], RunOutcome]


@dataclass
class ScriptedLauncher:
    """Each call plays the next process: it writes the probe's files and says how it ended."""

    processes: list[Process]
    name: str = "local"
    specs: list[RunSpec] = field(default_factory=list)

    def python_executable(self) -> str:
        return "python"

    def isolates(self, output_dir: Path) -> bool:
        return False  # its runs write into a copy, as a Docker run's do

    def shares_by_binding(self) -> bool:
        return False

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        self.specs.append(spec)
        return self.processes[len(self.specs) - 1](spec)


def step(number: int, weight: str = "w") -> dict[str, Any]:
    return {"step": number, "loss": 1.0 / number, "params": {"fc.weight": f"{weight}{number}"}}


def write_probe(spec: RunSpec, name: str, value: Any) -> None:
    directory = probe.probe_output_dir(spec.run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(v) + "\n" for v in value) if name.endswith(".jsonl") else (
        json.dumps(value))
    mode = "a" if name.endswith(".jsonl") else "w"
    with (directory / name).open(mode) as file:
        file.write(text)


def stopped_at_checkpoint(spec: RunSpec) -> RunOutcome:
    write_probe(spec, probe.TRAJECTORY_FILE, [step(1), step(2)])
    write_probe(spec, probe.RESUME_POINT_FILE, {"step": 2, "checkpoint": "ck/last.pt"})
    write_probe(spec, probe.STATUS_FILE, {"stopped": "resume_point"})
    return RunOutcome(probe.STOP_EXIT_CODE, 1.0)


def resumed(weight: str) -> Process:
    def process(spec: RunSpec) -> RunOutcome:
        write_probe(spec, probe.TRAJECTORY_FILE, [step(3, weight), step(4, weight)])
        write_probe(spec, probe.STATUS_FILE, {})
        return RunOutcome(0, 2.0)

    return process


def crash(spec: RunSpec) -> RunOutcome:
    write_probe(spec, probe.STATUS_FILE, {})  # the resumed process's probe loaded, then it broke
    return RunOutcome(1, 1.0)


def config_in(tmp_path: Path, resume: ResumeConfig | None = None) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir(exist_ok=True)
    return Config(workdir=workdir, output_dir=workdir / "out", command="python train.py",
                  resume=resume)


def run_a(tmp_path: Path) -> RunRecord:
    return RunRecord(
        name="A", mode="deterministic", launcher="local", run_dir=tmp_path / "A",
        log_path=tmp_path / "A.log", exit_code=0, wall_seconds=3.0, timed_out=False,
        stopped=None, trajectory=[step(n) for n in range(1, 5)], alerts=[], probe_status={},
        in_process_fingerprint=None, artifacts=[], unmatched_globs=[])


def test_without_resume_nothing_is_recorded_or_reported(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    spec = build_spec(config, ScriptedLauncher([]), "A", "deterministic")

    record_states(config, spec)

    assert probe.ENV_RESUME_RECORDS not in spec.env
    assert unchecked(config, agreed=False) is None


def test_why_run_r_did_not_run(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=2))

    notes = [unchecked(config, agreed=True), unchecked(config, agreed=False),
             unchecked(config, agreed=True, strict_stop=True)]

    assert [(n or {}).get("status") for n in notes] == [Resume.NOT_RUN] * 3
    assert [(n or {}).get("note") for n in notes] == [STOPPED_EARLIER, NOT_AGREED, STRICT_STOP]


def test_the_resumed_process_gets_the_checkpoint_and_its_own_log(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=2, command="python train.py --resume"))
    spec = build_spec(config, ScriptedLauncher([]), "R", "deterministic")
    spec.env[probe.ENV_RESUME_AFTER] = "2"

    second = resumed_spec(spec, config, ScriptedLauncher([]), ResumePoint(3, "ck/3.pt"))

    assert second.argv == shell_argv("python train.py --resume")
    assert probe.ENV_RESUME_AFTER not in second.env
    assert second.env[probe.ENV_RESUME_CHECKPOINT] == "ck/3.pt"
    assert second.env[probe.ENV_RESUME_STEP] == "3"
    assert second.log_path == spec.log_path.with_name(RESUMED_LOG)
    assert (second.run_dir, second.workdir) == (spec.run_dir, spec.workdir)
    unset = config_in(tmp_path, ResumeConfig(after=2))
    assert resume_argv(unset, ScriptedLauncher([])) == shell_argv("python train.py")


def test_a_run_r_that_continues_as_run_a_did_is_the_same(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=2))
    launcher = ScriptedLauncher([stopped_at_checkpoint, resumed("w")])
    comparison = empty_comparison(ToleranceConfig())

    record = check(config, launcher, run_a(tmp_path), comparison, lambda name: print)

    first, second = launcher.specs
    assert first.env[probe.ENV_RESUME_AFTER] == "2"
    assert first.env[probe.ENV_RESUME_RECORDS] == "1"
    assert second.env[probe.ENV_RESUME_CHECKPOINT] == "ck/last.pt"
    assert record.name == "R" and record.purpose == "resume"
    assert record.stopped is None  # the first process's stop was the resume point
    assert record.wall_seconds == 3.0
    resume = comparison["resume"]
    assert resume is not None
    assert resume["status"] == Resume.SAME
    assert (resume["resume_step"], resume["checkpoint"]) == (2, "ck/last.pt")


def test_a_run_r_that_continues_differently_has_changed(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=2))
    launcher = ScriptedLauncher([stopped_at_checkpoint, resumed("other")])
    comparison = empty_comparison(ToleranceConfig())

    check(config, launcher, run_a(tmp_path), comparison, lambda name: print)

    resume = comparison["resume"]
    assert resume is not None
    assert resume["status"] == Resume.CHANGED
    assert resume["first_divergence"] is not None and resume["first_divergence"]["step"] == 3


def test_no_checkpoint_before_the_end_is_the_error_no_checkpoint(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=5))
    launcher = ScriptedLauncher([lambda spec: RunOutcome(0, 1.0)])

    with pytest.raises(GateError) as raised:
        check(config, launcher, run_a(tmp_path), empty_comparison(ToleranceConfig()),
              lambda name: print)

    assert raised.value.kind is ErrorKind.NO_CHECKPOINT
    assert raised.value.message.startswith("run R wrote no checkpoint at or after step 5"
                                           " (resume.after) before it ended with code 0")


def test_a_resumed_process_that_crashes_or_times_out_is_named(tmp_path: Path) -> None:
    config = config_in(tmp_path, ResumeConfig(after=2))
    crashing = ScriptedLauncher([stopped_at_checkpoint, crash])
    hanging = ScriptedLauncher([lambda spec: RunOutcome(None, 9.0, timed_out=True)])

    with pytest.raises(GateError) as crashed:
        check(config, crashing, run_a(tmp_path), empty_comparison(ToleranceConfig()),
              lambda name: print)
    with pytest.raises(GateError) as timed_out:
        check(config, hanging, run_a(tmp_path), empty_comparison(ToleranceConfig()),
              lambda name: print)

    assert crashed.value.kind is ErrorKind.RUN_FAILED
    assert crashed.value.message.startswith("run R (resumed) exited with code 1 (log: ")
    assert timed_out.value.kind is ErrorKind.TIMEOUT
    assert timed_out.value.message.startswith("run R timed out after 9.0 s and was killed")


def test_states_are_read_per_rank_up_to_a_partial_line(tmp_path: Path) -> None:
    directory = probe.probe_output_dir(tmp_path)
    directory.mkdir()
    (directory / probe.TRAJECTORY_FILE).write_text("")
    (directory / "trajectory-rank1.jsonl").write_text("")
    (directory / probe.RESUME_STATE_FILE).write_text('{"step": 1}\n[1]\n{"step": 2}\n{"ste')

    assert states(tmp_path) == {0: [{"step": 1}, {"step": 2}], 1: []}


def test_a_resume_command_that_fails_before_its_probe_loads_is_an_error_not_a_change(
        tmp_path: Path) -> None:
    """The first process's stop, left in the shared run folder, is not the resumed one's."""
    config = config_in(tmp_path, ResumeConfig(after=2, command="false"))
    launcher = ScriptedLauncher([stopped_at_checkpoint, lambda spec: RunOutcome(1, 0.1)])

    with pytest.raises(GateError) as raised:
        check(config, launcher, run_a(tmp_path), empty_comparison(ToleranceConfig()),
              lambda name: print)

    assert raised.value.kind is ErrorKind.RUN_FAILED
    assert raised.value.message.startswith("run R (resumed) exited with code 1 (log: ")
