"""One run of the training: its command, environment and spec, what it left (gathered from real
probe files), how it ended and its manifest entry."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from repro_gate import notices, probe
from repro_gate.compare import sha256_file
from repro_gate.config import Config, CostConfig, ReferenceConfig
from repro_gate.errors import ErrorKind
from repro_gate.fingerprint.seeding import DETERMINISM_VARIABLES
from repro_gate.gate import workcopy
from repro_gate.gate.collect import Artifact
from repro_gate.gate.training_run import (
    REFERENCE_DIR,
    REFERENCE_MODULE,
    RunRecord,
    build_spec,
    command_argv,
    fresh_run_dir,
    gather,
    log_tail,
    run_environment,
    run_failure,
    user_environment,
)
from repro_gate.gate.workcopy import WORK_SUBDIR
from repro_gate.launch import namespaces, progress
from repro_gate.launch.base import RunOutcome
from repro_gate.launch.local import LocalLauncher
from repro_gate.launch.shell import shell_argv


def config_in(tmp_path: Path, **fields: object) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir(exist_ok=True)
    (workdir / "train.py").write_text("print('train')\n")
    return replace(Config(workdir=workdir, output_dir=workdir / "out"), **fields)


def record(tmp_path: Path, **fields: object) -> RunRecord:
    base = RunRecord(
        name="A", mode="deterministic", launcher="local", run_dir=tmp_path,
        log_path=tmp_path / "A.log", exit_code=0, wall_seconds=12.345678912, timed_out=False,
        stopped=None, trajectory=[{"step": 1}], alerts=[], probe_status={},
        in_process_fingerprint=None, artifacts=[], unmatched_globs=[])
    return replace(base, **fields)


def test_a_command_string_runs_through_the_shell_and_a_list_as_is(tmp_path: Path) -> None:
    launcher = LocalLauncher()

    assert command_argv(config_in(tmp_path, command="python train.py --x 1"), launcher) == (
        shell_argv("python train.py --x 1"), [])
    assert command_argv(config_in(tmp_path, command=("python", "train.py")), launcher) == (
        ["python", "train.py"], [])


def test_without_a_command_the_reference_training_runs(tmp_path: Path) -> None:
    config = config_in(tmp_path, reference=ReferenceConfig(steps=7, batch_size=4, width=8,
                                                           device="cpu"))

    argv, path = command_argv(config, LocalLauncher())

    # Every run trains `reference.steps`, the cost run included.
    assert argv == [sys.executable, "-m", REFERENCE_MODULE, "--steps", "7", "--batch-size", "4",
                    "--width", "8", "--device", "cpu"]
    assert path == [REFERENCE_DIR]


def test_the_run_environment_of_each_mode(tmp_path: Path) -> None:
    config = config_in(tmp_path, seed=7, env={"PYTHONHASHSEED": "5", "MINE": "x"})

    deterministic = run_environment(config, "deterministic", max_steps=5, hash_seed=1)
    default = run_environment(config, "default", max_steps=0)

    assert deterministic[probe.ENV_MODE] == "deterministic"
    assert deterministic[probe.ENV_SEED] == "7"
    assert deterministic[probe.ENV_MAX_STEPS] == "5"
    assert deterministic["CUBLAS_WORKSPACE_CONFIG"] == DETERMINISM_VARIABLES[
        "CUBLAS_WORKSPACE_CONFIG"]
    assert deterministic["PYTHONHASHSEED"] == "5"  # the user's `env` comes last
    assert default == {probe.ENV_MODE: "default", probe.ENV_DETERMINISM: "warn",
                       "PYTHONHASHSEED": "5", "MINE": "x"}
    assert probe.ENV_COST_PLAN in run_environment(config, "cost", max_steps=0)


def test_each_deterministic_run_gets_its_own_hash_seed_and_the_cost_run_none(
    tmp_path: Path,
) -> None:
    config = config_in(tmp_path)

    assert run_environment(config, "deterministic", max_steps=0)["PYTHONHASHSEED"] == "0"
    assert run_environment(config, "deterministic", max_steps=0, hash_seed=1)[
        "PYTHONHASHSEED"] == "1"
    assert "PYTHONHASHSEED" not in run_environment(config, "cost", max_steps=0)
    assert "PYTHONHASHSEED" not in run_environment(config, "default", max_steps=0)


def test_the_user_environment_records_the_users_and_the_gates_values(tmp_path: Path) -> None:
    values = json.loads(user_environment(config_in(tmp_path, env={"CUBLAS_WORKSPACE_CONFIG":
                                                                 ":16:8"})))

    assert values["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert values["gate:CUBLAS_WORKSPACE_CONFIG"] == DETERMINISM_VARIABLES[
        "CUBLAS_WORKSPACE_CONFIG"]
    assert "gate:PYTHONHASHSEED" not in values  # observed per run, not a setting of the gate


def test_build_spec_gives_a_fresh_run_directory_with_its_own_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")  # a launcher that cannot isolate
    config = config_in(tmp_path, command="python train.py", timeout=30.0,
                       cost=CostConfig(enabled=False))
    stale = config.output_dir / "runs" / "B" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier gate")

    spec = build_spec(config, LocalLauncher(), "B", "deterministic", max_steps=4)

    assert spec.run_dir == config.output_dir / "runs" / "B"
    assert not stale.exists()
    assert spec.workdir == config.output_dir / "work"  # one path for every run's copy
    assert (spec.workdir / "train.py").read_text() == "print('train')\n"
    assert spec.workspace == config.workdir
    assert spec.log_path == config.output_dir / "logs" / "B.log"
    assert spec.python_path == [probe.INJECT_DIR]
    assert spec.env[probe.ENV_MAX_STEPS] == "4"
    assert spec.timeout == 30.0
    assert spec.isolation is None


@pytest.mark.skipif(namespaces.refusal(Path("/tmp")) is not None,
                    reason="the kernel refuses user namespaces or overlayfs here")
def test_an_isolated_run_starts_in_the_workdir_over_its_own_layer(tmp_path: Path) -> None:
    config = config_in(tmp_path, command="python train.py")

    spec = build_spec(config, LocalLauncher(), "A", "deterministic")

    assert spec.workdir == spec.workspace == config.workdir
    assert spec.isolation is not None
    assert spec.isolation.upper == spec.run_dir / WORK_SUBDIR
    assert list(spec.isolation.upper.iterdir()) == []  # nothing copied
    assert config.output_dir.resolve() in spec.hidden
    (spec.isolation.upper / "model.pt").write_bytes(b"weights")  # what the run wrote

    gathered = gather(LocalLauncher(), spec, RunOutcome(0, 1.0), ["*.pt"])

    assert [a.rel_path for a in gathered.artifacts] == ["model.pt"]
    assert not spec.isolation.scratch.exists()


def test_gather_reads_every_ranks_probe_files_and_what_the_run_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")
    config = config_in(tmp_path, command="python train.py")
    spec = build_spec(config, LocalLauncher(), "A", "deterministic")
    probe_dir = probe.probe_output_dir(spec.run_dir)
    probe_dir.mkdir()
    (probe_dir / "trajectory.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"st')
    (probe_dir / "trajectory-rank1.jsonl").write_text('{"step": 1}\n')
    (probe_dir / "status.json").write_text(json.dumps({"stopped": "max_steps"}))
    (probe_dir / "status-rank1.json").write_text(json.dumps({"stopped": "divergence"}))
    (probe_dir / "alerts.json").write_text(json.dumps([{"op": "a"}]))
    (probe_dir / "alerts-rank1.json").write_text(json.dumps([{"op": "b"}]))
    (spec.workdir / "model.pt").write_bytes(b"weights")  # what the run wrote in its copy

    gathered = gather(LocalLauncher(), spec, RunOutcome(1, 3.0, details={"pid": 1}), ["*.pt"])

    assert gathered.trajectory == [{"step": 1}, {"step": 2}]  # the partial line left out
    assert gathered.other_ranks == {1: [{"step": 1}]}
    assert gathered.ranks == 2
    # The probe's reason, of any rank: a status claiming a divergence is not believed (only the
    # gate stops a run for one).
    assert gathered.stopped == "max_steps"
    assert [a["op"] for a in gathered.alerts] == ["a", "b"]
    assert [a.rel_path for a in gathered.artifacts] == ["model.pt"]
    assert gathered.unmatched_globs == []
    assert gathered.ended_cleanly  # torchrun's exit 1 for a rank the probe stopped
    assert gathered.divergence is None
    assert sorted(p.name for p in (spec.run_dir / WORK_SUBDIR).iterdir()) == ["model.pt"]
    assert not spec.workdir.exists()  # moved into the run directory


def test_a_run_records_the_hash_seed_it_got(tmp_path: Path) -> None:
    config = config_in(tmp_path, command="python train.py")

    spec = build_spec(config, LocalLauncher(), "B", "deterministic", hash_seed=1)
    gathered = gather(LocalLauncher(), spec, RunOutcome(0, 1.0), [])
    cost = build_spec(config, LocalLauncher(), "cost", "cost")

    assert gathered.hash_seed == "1"
    assert gathered.to_manifest()["hash_seed"] == "1"
    assert "hash_seed" not in gather(LocalLauncher(), cost, RunOutcome(0, 1.0), []).to_manifest()


def test_how_a_run_ended(tmp_path: Path) -> None:
    stopped = record(tmp_path, exit_code=probe.STOP_EXIT_CODE, stopped="max_steps")

    assert record(tmp_path).ended_cleanly
    assert stopped.ended_cleanly
    assert not record(tmp_path, exit_code=probe.STOP_EXIT_CODE).ended_cleanly
    assert not record(tmp_path, timed_out=True).ended_cleanly
    assert record(tmp_path, trajectory=[]).ranks == 1


def test_a_timeout_or_a_crash_is_the_runs_error_with_its_log_tail(tmp_path: Path) -> None:
    (tmp_path / "A.log").write_text("".join(f"line {i}\n" for i in range(30)))

    timed_out = run_failure(record(tmp_path, timed_out=True, exit_code=None), 10)
    crashed = run_failure(record(tmp_path, exit_code=3), None)

    assert timed_out is not None and crashed is not None
    assert timed_out.kind is ErrorKind.TIMEOUT
    assert timed_out.message == (f"run A (deterministic) timed out after 12.3 s (timeout: 10 s)"
                                 f" and was killed (log: {tmp_path / 'A.log'})")
    assert crashed.kind is ErrorKind.RUN_FAILED
    assert crashed.message.startswith("run A (deterministic) exited with code 3")
    assert crashed.detail.splitlines() == [f"line {i}" for i in range(10, 30)]
    assert run_failure(record(tmp_path), None) is None
    assert log_tail(tmp_path / "absent.log") == ""


def test_the_manifest_entry_hashes_the_artifacts(tmp_path: Path) -> None:
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    entry = record(tmp_path, artifacts=[Artifact("model.pt", model)], purpose="localisation",
                   other_ranks={1: [{"step": 1}]}, details={"container": "abc"}).to_manifest()

    assert entry["artifacts"] == [{"path": "model.pt", "sha256": sha256_file(model), "bytes": 7}]
    assert entry["wall_seconds"] == 12.345679
    assert entry["steps"] == 1
    assert entry["ranks"] == 2
    assert entry["purpose"] == "localisation"
    assert entry["container"] == "abc"
    assert "ranks" not in record(tmp_path).to_manifest()


def test_a_fresh_run_directory_replaces_a_file_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("a file")

    assert fresh_run_dir(tmp_path / "runs") == tmp_path / "runs"
    assert (tmp_path / "runs").is_dir()
    assert list((tmp_path / "runs").iterdir()) == []


def test_a_slow_copy_says_how_far_it_got(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")
    monkeypatch.setenv(progress.ENV_STATUS_SECONDS, "0.1")
    copy_file = workcopy._copy_file

    def slowly(source: Path, target: Path) -> None:
        time.sleep(0.2)
        copy_file(source, target)

    monkeypatch.setattr(workcopy, "_copy_file", slowly)
    config = config_in(tmp_path, command="python train.py")
    for index in range(3):
        (config.workdir / f"part{index}.py").write_text("x = 1\n")
    said: list[str] = []

    with notices.sent_to(said.append):
        build_spec(config, LocalLauncher(), "A", "deterministic")

    copying = [line for line in said if "making the working copy of run A: " in line]
    assert len(copying) >= 3, said
    assert copying[-1].startswith("repro-gate: making the working copy of run A: ")
    assert " files, 0 MB copied, " in copying[-1]
