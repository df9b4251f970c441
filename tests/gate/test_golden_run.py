"""Run G: the training once in a rebuilt environment, played by a launcher that writes the
probe's files; its record and the run data the golden comparison reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repro_gate import probe
from repro_gate.config import Config
from repro_gate.environments.virtualenvs import Environment
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.golden_run import runner
from repro_gate.gate.training_run import RunRecord
from repro_gate.golden.rebuild import PURPOSE, RUN_NAME
from repro_gate.launch.base import LineSink, RunOutcome, RunSpec


@dataclass
class WritingLauncher:
    """Writes two steps and a checkpoint as the run would, and ends with `exit_code`."""

    exit_code: int = 0
    name: str = "local"
    specs: list[RunSpec] = field(default_factory=list)

    def python_executable(self) -> str:
        return "/usr/bin/python3"

    def isolates(self, output_dir: Path) -> bool:
        return False  # its runs write into a copy, as a Docker run's do

    def shares_by_binding(self) -> bool:
        return False

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        self.specs.append(spec)
        directory = probe.probe_output_dir(spec.run_dir)
        directory.mkdir(parents=True)
        steps = [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]
        (directory / probe.TRAJECTORY_FILE).write_text(
            "".join(json.dumps(s) + "\n" for s in steps))
        (spec.workdir / "model.pt").write_bytes(b"weights")
        sink("trained")
        return RunOutcome(self.exit_code, 1.5)


def environment(tmp_path: Path) -> Environment:
    root = tmp_path / "env"
    return Environment(python=root / "bin" / "python", lock_sha256="0" * 64,
                       pins={"torch": "2.4.0"}, reused=True, path=root)


def config_in(tmp_path: Path) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir()
    return Config(workdir=workdir, output_dir=workdir / "out", name="train",
                  command="python train.py", artifacts=("*.pt",))


def test_run_g_runs_in_the_environment_and_gives_its_run_data(tmp_path: Path) -> None:
    launcher = WritingLauncher()
    records: list[RunRecord] = []
    lines: list[tuple[str, str]] = []
    run = runner(config_in(tmp_path), launcher, records,
                 lambda name: lambda line: lines.append((name, line)))

    data = run(environment(tmp_path))

    spec = launcher.specs[0]
    assert spec.name == RUN_NAME
    assert spec.mode == "deterministic"
    assert spec.python_environment is not None
    assert spec.python_environment.root == tmp_path / "env"
    assert lines == [(RUN_NAME, "trained")]
    assert [(r.name, r.purpose) for r in records] == [(RUN_NAME, PURPOSE)]
    assert data.trajectory == [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]
    assert [rel for rel, _ in data.artifacts] == ["model.pt"]
    assert data.gate == "train"
    assert data.fingerprint == {}


def test_a_failed_run_g_is_recorded_and_raised(tmp_path: Path) -> None:
    records: list[RunRecord] = []
    run = runner(config_in(tmp_path), WritingLauncher(exit_code=1), records,
                 lambda name: lambda line: None)

    with pytest.raises(GateError) as raised:
        run(environment(tmp_path))

    assert raised.value.kind is ErrorKind.RUN_FAILED
    assert raised.value.message.startswith("run G (deterministic) exited with code 1")
    assert [r.purpose for r in records] == [PURPOSE]
