"""The gate's pipeline on recorded run directories: no training process is started.

The recordings come from real gate runs of the tiny trainings; a launcher that plays them back
lets the pipeline (runs, comparison, verdict, manifest, publishing order) be tested on its own.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.gate_cli import check, script
from helpers.paths import TRAININGS

from repro_gate.config import Config
from repro_gate.errors import GateError
from repro_gate.gate.pipeline import run_gate
from repro_gate.launch.base import Launcher, LineSink, RunOutcome, RunSpec

NOT_PUSHED = {"pushed": False, "reason": "no pushgateway configured"}


@dataclass
class Recording:
    """The run directories and exit codes a real gate run left behind."""

    run_dirs: dict[str, Path]
    exit_codes: dict[str, int]


@dataclass
class ReplayLauncher:
    """Plays back recorded runs: run `name` gets the files the recorded run `name` wrote."""

    recordings: dict[str, Recording]  # run name -> the recording to take it from
    name: str = "local"  # it plays back local runs, and the manifest records it so
    started: list[str] = field(default_factory=list)

    def python_executable(self) -> str:
        return sys.executable

    def isolates(self, output_dir: Path) -> bool:
        return False  # its runs write into a copy, as a Docker run's do

    def shares_by_binding(self) -> bool:
        return False

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        recording = self.recordings[spec.name]
        shutil.copytree(recording.run_dirs[spec.name], spec.run_dir, dirs_exist_ok=True)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        spec.log_path.write_text("replayed\n")
        sink("replayed")
        self.started.append(spec.name)
        return RunOutcome(exit_code=recording.exit_codes[spec.name], wall_seconds=1.0)


@dataclass
class RecordingPublisher:
    """Remembers what it was told, and what the manifest on disk said at that moment."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def started(self) -> None:
        self.calls.append(("started", None))

    def finished(self, document: dict[str, Any], manifest_path: Path | None) -> dict[str, Any]:
        on_disk = json.loads(manifest_path.read_text()) if manifest_path else None
        self.calls.append(("finished", on_disk))
        return {"metrics": NOT_PUSHED}


def record(tmp_path: Path, training: str, *flags: str) -> Recording:
    """Run the real gate on one of the tiny trainings and keep what its runs wrote."""
    for source in TRAININGS.glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    result = check(tmp_path, *flags, *script(training))
    runs = result.manifest["runs"]
    assert runs, result.stderr
    return Recording({r["name"]: Path(r["run_dir"]) for r in runs},
                     {r["name"]: r["exit_code"] for r in runs})


@pytest.fixture(scope="module")
def reproducible(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(tmp_path_factory.mktemp("deterministic"), "deterministic.py")


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """A training whose step 3 takes OS entropy: runs A and B differ from there on."""
    return record(tmp_path_factory.mktemp("urandom"), "urandom_noise.py", "--no-fail-fast")


def gate_config(tmp_path: Path) -> Config:
    return Config(workdir=tmp_path, output_dir=tmp_path / "out", command=("python", "train.py"))


def written_cost(tmp_path: Path) -> Any:
    return json.loads((tmp_path / "out" / "manifest.json").read_text())["cost"]


def replay(config: Config, launcher: Launcher, publisher: RecordingPublisher) -> Any:
    return run_gate(config, lambda _: launcher, publisher, lambda name: lambda line: None)


def test_recorded_equal_runs_pass_and_publishing_comes_after_the_written_verdict(
    tmp_path: Path, reproducible: Recording
) -> None:
    launcher = ReplayLauncher(dict.fromkeys(("A", "B", "cost"), reproducible))
    publisher = RecordingPublisher()

    outcome = replay(gate_config(tmp_path), launcher, publisher)

    assert outcome.exit_code == 0
    assert launcher.started == ["A", "B"]  # too short for a cost run: none is started
    assert written_cost(tmp_path)["reason"].endswith(", so the cost run was not started")
    assert [call for call, _ in publisher.calls] == ["started", "finished"]
    written_before_publishing = publisher.calls[1][1]
    assert written_before_publishing["verdict"] == "pass"
    assert "metrics" not in written_before_publishing
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["verdict"] == "pass"
    assert on_disk["metrics"] == NOT_PUSHED
    assert on_disk["reasons"][0]["code"] == "bitwise_equal"
    assert on_disk["config"]["command"] == ["python", "train.py"]


def test_recorded_divergent_runs_fail_at_the_recorded_step(
    tmp_path: Path, leaky: Recording
) -> None:
    launcher = ReplayLauncher(dict.fromkeys(("A", "B", "cost"), leaky))

    outcome = replay(gate_config(tmp_path), launcher, RecordingPublisher())

    assert outcome.exit_code == 1
    divergence = outcome.manifest["comparison"]["first_divergence"]
    assert divergence["step"] == 3
    assert divergence["parameters"] == ["head.bias"]


def test_a_launcher_that_cannot_open_gives_an_error_manifest_and_is_still_published(
    tmp_path: Path,
) -> None:
    def unreachable(config: Config) -> Launcher:
        raise GateError("cannot reach the Docker daemon at unix:///nowhere", kind="docker")

    publisher = RecordingPublisher()
    outcome = run_gate(gate_config(tmp_path), unreachable, publisher, lambda n: lambda line: None)

    assert outcome.exit_code == 2
    assert outcome.manifest["reasons"] == [
        {"code": "docker", "message": "cannot reach the Docker daemon at unix:///nowhere"}
    ]
    assert [call for call, _ in publisher.calls] == ["finished"]
    assert publisher.calls[0][1]["verdict"] == "error"
