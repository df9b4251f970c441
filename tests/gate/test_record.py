"""Assembling what the gate learned: merged op alerts, the op and the seeding named at the
divergence, the noise floor, the golden rule and the manifest itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from repro_gate.compare.document import Comparison
from repro_gate.compare.run_pair import empty_comparison
from repro_gate.compare.status import Status
from repro_gate.compare.vary import not_run
from repro_gate.config import Config, CostConfig, GoldenConfig, ToleranceConfig, VaryConfig
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.evidence import Evidence
from repro_gate.gate.record import (
    GateState,
    assemble,
    attach_hash_seeds,
    attach_op,
    attach_unseeded,
    deterministic,
    fingerprint_sections,
    noise_floor,
    nondeterministic_ops,
    numerics_rule,
    portability_rule,
)
from repro_gate.gate.training_run import RunRecord
from repro_gate.gate.verdict import BITWISE_EQUAL, NOT_PORTABLE, NUMERICS_CHANGED, reason
from repro_gate.launch.base import Mode


def run(name: str, mode: Mode = "deterministic", *, alerts: list[dict[str, Any]] | None = None,
        trajectory: list[dict[str, Any]] | None = None, purpose: str | None = None,
        exit_code: int = 0) -> RunRecord:
    return RunRecord(
        name=name, mode=mode, launcher="local",
        run_dir=Path(f"/runs/{name}"), log_path=Path(f"/logs/{name}.log"), exit_code=exit_code,
        wall_seconds=2.0, timed_out=False, stopped=None, trajectory=trajectory or [],
        alerts=alerts or [], probe_status={}, in_process_fingerprint=None, artifacts=[],
        unmatched_globs=[], purpose=purpose,
    )


def divergent(cause: str, step: int = 3) -> Comparison:
    comparison = empty_comparison(ToleranceConfig())
    comparison["first_divergence"] = {"step": step, "parameters": ["w"], "loss_differs": True,
                                      "rank": 0, "runs": ["A", "B"], "cause": cause}
    return comparison


def test_deterministic_runs_leave_out_the_cost_default_and_localisation_runs() -> None:
    records = [run("A"), run("cost", "cost"), run("default", "default"),
               run("L", purpose="localisation"), run("B")]

    assert [r.name for r in deterministic(records)] == ["A", "B"]


def test_alerts_of_several_runs_merge_by_op_and_place() -> None:
    alert = {"op": "aten::index_add_", "file": "train.py", "line": 42, "count": 3,
             "kind": "nondeterministic_op", "message": "no deterministic kernel", "steps": [2, 1]}
    records = [
        run("A", alerts=[alert]),
        run("B", alerts=[{**alert, "count": 5, "steps": [3, True, 0, "x"]}]),
        run("cost", "cost", alerts=[{**alert, "count": 99}]),  # not evidence: left out
        run("L", purpose="localisation", alerts=[{**alert, "count": 99}]),
        run("A2", alerts=[{"op": "aten::scatter_", "file": "model.py", "line": 7}]),
    ]

    ops = nondeterministic_ops(records)

    assert ops == [
        {"op": "aten::scatter_", "file": "model.py", "line": 7, "count": 1,
         "kind": "nondeterministic_op", "runs": ["A2"], "message": "", "steps": []},
        {"op": "aten::index_add_", "file": "train.py", "line": 42, "count": 5,
         "kind": "nondeterministic_op", "runs": ["A", "B"],
         "message": "no deterministic kernel", "steps": [1, 2, 3]},
    ]


def test_the_op_seen_during_the_divergent_step_is_named() -> None:
    ops = [{"op": "strict", "file": "a.py", "line": 1, "steps": [3], "kind": "strict_error"},
           {"op": "early", "file": "a.py", "line": 2, "steps": [1], "kind": "nondeterministic_op"},
           {"op": "culprit", "file": "b.py", "line": 9, "steps": [2, 3],
            "kind": "nondeterministic_op"}]
    forward, optimizer, clean = divergent("forward"), divergent("optimizer"), divergent("input")

    attach_op(forward, ops)
    attach_op(optimizer, ops)
    attach_op(clean, [])

    assert forward["first_divergence"]["op"] == {"op": "culprit", "file": "b.py", "line": 9}
    assert "op" not in optimizer["first_divergence"]  # not a cause an op explains
    assert "op" not in clean["first_divergence"]
    backward = divergent("backward", step=5)
    attach_op(backward, ops)
    assert backward["first_divergence"]["op"] is None


def test_an_unseeded_training_is_named_at_its_divergence() -> None:
    comparison = divergent("initialization")
    seeding = {"unseeded": ["torch"], "first_parameter": {"file": "train.py", "line": 12}}

    attach_unseeded(comparison, {"fingerprint": {"random": {"seeding": seeding}}})

    assert comparison["first_divergence"]["unseeded"] == {
        "generators": ["torch"], "seeded_late": False, "file": "train.py", "line": 12}
    seeded = divergent("initialization")
    attach_unseeded(seeded, {"fingerprint": {"random": {"seeding": {"unseeded": []}}}})
    assert "unseeded" not in seeded["first_divergence"]


def test_a_divergence_between_runs_of_different_hash_seeds_records_them() -> None:
    comparison, pinned = divergent("input"), divergent("input")
    records = [replace(run("A"), hash_seed="0"), replace(run("B"), hash_seed="1"),
               run("cost", "cost")]

    attach_hash_seeds(comparison, records)
    attach_hash_seeds(pinned, [replace(r, hash_seed="7") for r in records[:2]])

    assert comparison["first_divergence"]["hash_seeds"] == {"A": "0", "B": "1"}
    assert "hash_seeds" not in pinned["first_divergence"]  # the user's one seed for both


def test_the_noise_floor_compares_the_two_default_runs() -> None:
    steps_a = [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]
    steps_b = [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.6}]
    records = [run("A"), run("default", "default", trajectory=steps_a),
               run("default2", "default", trajectory=steps_b)]

    assert noise_floor(records) == {"first_divergent_step": 2, "steps_compared": 2,
                                    "runs": ["default", "default2"]}
    crashed = [records[1], replace(records[2], exit_code=1)]
    assert noise_floor(crashed) is None


def test_a_changed_factor_fails_the_gate_only_when_on_change_is_fail(tmp_path: Path) -> None:
    comparison = empty_comparison(ToleranceConfig())
    comparison["vary"] = [
        {"factor": "threads", "status": "changed", "values": {"A": 2, "V": 1},
         "first_divergence": {"step": 3, "cause": "forward", "parameters": ["w"]},
         "artifacts": [], "note": ""},
        not_run("time", "libfaketime is not installed (the Debian package faketime)")]
    passed = [reason(BITWISE_EQUAL, "equal")]
    failing = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                     vary=VaryConfig(factors=("threads", "time")))
    warning = replace(failing, vary=VaryConfig(factors=("threads", "time"), on_change="warn"))

    outcome, reasons = portability_rule(failing, comparison, "pass", passed)

    assert outcome == "fail"
    assert reasons[0] == reason(NOT_PORTABLE, "the numbers change with threads (step 3, forward"
                                " pass diverges): pin the thread count (torch.set_num_threads(N)"
                                " and OMP_NUM_THREADS=N)")
    assert reasons[1:] == passed
    assert portability_rule(warning, comparison, "pass", passed) == ("pass", passed)
    comparison["vary"] = comparison["vary"][1:]  # not run is never changed
    assert portability_rule(failing, comparison, "pass", passed) == ("pass", passed)


def test_changed_numerics_fail_the_gate_only_when_on_change_is_fail(tmp_path: Path) -> None:
    comparison = empty_comparison(ToleranceConfig())
    comparison["golden"] = {"status": "changed", "path": "golden/cpu.json",
                            "machine_class": "cpu", "first_divergence": None}
    passed = [reason(BITWISE_EQUAL, "equal")]
    failing = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    warning = replace(failing, golden=GoldenConfig(on_change="warn"))

    outcome, reasons = numerics_rule(failing, comparison, passed)

    assert outcome == "fail"
    assert reasons == [reason(NUMERICS_CHANGED, "numerics changed against `golden/cpu.json`"),
                       *passed]
    assert numerics_rule(warning, comparison, passed) == ("pass", passed)
    comparison["golden"] = {**comparison["golden"], "status": "same"}
    assert numerics_rule(failing, comparison, passed) == ("pass", passed)


def test_no_fingerprint_sections_before_the_host_was_read(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")

    assert fingerprint_sections(config, GateState()) == {}


def test_an_error_state_gives_an_error_manifest_with_its_kind(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                    cost=CostConfig(enabled=False))
    state = GateState(error=GateError("run A exited with code 3", kind=ErrorKind.RUN_FAILED),
                      evidence=Evidence(True, True))

    document = assemble(config, state, empty_comparison(ToleranceConfig()), "2024-01-01", 1.5)

    assert document["verdict"] == "error"
    assert document["reasons"] == [{"code": "run_failed", "message": "run A exited with code 3"}]
    assert "evidence" not in document
    assert document["wall_seconds"] == 1.5
    assert document["cost"] is None


def test_equal_runs_give_a_passing_manifest_with_their_evidence(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                    cost=CostConfig(enabled=False))
    state = GateState(records=[run("A"), run("B")], evidence=Evidence(True, False))
    comparison = empty_comparison(ToleranceConfig())
    comparison["trajectory"] = {"steps_compared": 0, "status": Status.NOT_RECORDED}
    comparison["artifacts"] = [{"path": "model.pt", "kind": "torch", "status": Status.EQUAL}]

    document = assemble(config, state, comparison, "2024-01-01", 0.25)

    assert document["verdict"] == "pass"
    assert document["reasons"] == [reason(
        BITWISE_EQUAL, "2 deterministic runs are bitwise equal: 1 artifacts"
        " (from artifacts only: no steps observed)")]
    assert document["evidence"] == {"probe_loaded": True, "steps_observed": False}
    assert [entry["name"] for entry in document["runs"]] == ["A", "B"]
    assert document["comparison"]["golden"] is None  # the host was not read: nothing to compare
