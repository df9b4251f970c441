"""The localisation run: when it starts, the spec it gets, and how its localise.json (written
here as the probe writes it) names the module of a divergence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro_gate import probe
from repro_gate.compare.document import Comparison
from repro_gate.compare.run_pair import empty_comparison
from repro_gate.config import Config, ToleranceConfig
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.localise import PURPOSE, RUN_NAME, SPARE_RUN_NAME, localise, outcome
from repro_gate.gate.record import GateState
from repro_gate.gate.training_run import RunRecord
from repro_gate.launch.base import RunSpec
from repro_gate.launch.local import LocalLauncher


def config_in(tmp_path: Path) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir()
    return Config(workdir=workdir, output_dir=workdir / "out", command="python train.py")


def divergent(cause: str, basis: str = "bitwise", rank: int = 0) -> Comparison:
    comparison = empty_comparison(ToleranceConfig())
    comparison["basis"] = basis
    comparison["first_divergence"] = {
        "step": 4, "parameters": ["fc.weight"], "loss_differs": False, "rank": rank,
        "runs": ["A", "B"], "cause": cause, "gradients": ["fc.weight"]}
    return comparison


def finished(spec: RunSpec, exit_code: int = 0, timed_out: bool = False) -> RunRecord:
    return RunRecord(
        name=spec.name, mode=spec.mode, launcher="local", run_dir=spec.run_dir,
        log_path=spec.log_path, exit_code=exit_code, wall_seconds=2.5, timed_out=timed_out,
        stopped=None, trajectory=[], alerts=[], probe_status={}, in_process_fingerprint=None,
        artifacts=[], unmatched_globs=[])


class Localiser:
    """Runs L as the probe would: writes `result` as localise.json of `rank`."""

    def __init__(self, result: dict[str, Any] | None, rank: int = 0) -> None:
        self.result, self.rank = result, rank
        self.specs: list[RunSpec] = []

    def __call__(self, spec: RunSpec) -> RunRecord:
        self.specs.append(spec)
        if self.result is not None:
            path = probe.probe_output_dir(spec.run_dir) / probe.rank_file(
                probe.LOCALISE_FILE, self.rank)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.result))
        return finished(spec)


FOUND = {"step": 4, "checked": 12, "module": "encoder.layer1", "class": "Linear"}


def test_a_forward_divergence_gets_its_module_from_run_l(tmp_path: Path) -> None:
    config, state, comparison = config_in(tmp_path), GateState(), divergent("forward")
    run_l = Localiser(FOUND)

    localise(config, LocalLauncher(), state, comparison, run_l)

    spec = run_l.specs[0]
    assert spec.name == RUN_NAME
    assert spec.env[probe.ENV_LOCALISE_STEP] == "4"
    assert spec.env[probe.ENV_MAX_STEPS] == "4"
    divergence = comparison["first_divergence"]
    assert divergence is not None
    assert divergence["module"] == "encoder.layer1"
    assert divergence["localisation"] == {
        "status": "found", "run": "L",
        "note": "run L ran the 12 module calls of step 4 again from the same inputs:"
                " `encoder.layer1` (Linear) is the first whose output changed"}
    assert [(r.name, r.purpose) for r in state.records] == [("L", PURPOSE)]


def test_a_backward_divergence_becomes_forward_only_when_a_module_is_found(
    tmp_path: Path,
) -> None:
    config = config_in(tmp_path)
    found, not_found = divergent("backward"), divergent("backward")

    localise(config, LocalLauncher(), GateState(), found, Localiser(FOUND))
    localise(config, LocalLauncher(), GateState(), not_found,
             Localiser({"step": 4, "checked": 12, "module": None}))

    assert found["first_divergence"] is not None and not_found["first_divergence"] is not None
    assert found["first_divergence"]["cause"] == "forward"
    assert "gradients" not in found["first_divergence"]
    assert not_found["first_divergence"]["cause"] == "backward"
    assert "module" not in not_found["first_divergence"]


@pytest.mark.parametrize(("comparison", "strict"), [
    (divergent("optimizer"), False),
    (divergent("forward", basis="tolerance"), False),
    (divergent("forward"), True),
    (empty_comparison(ToleranceConfig()), False),
])
def test_run_l_starts_only_for_a_bitwise_forward_or_backward_divergence(
    tmp_path: Path, comparison: Comparison, strict: bool
) -> None:
    run_l = Localiser(FOUND)

    localise(config_in(tmp_path), LocalLauncher(), GateState(strict_stop=strict), comparison,
             run_l)

    assert run_l.specs == []
    assert "module" not in (comparison["first_divergence"] or {})


def test_a_gate_with_a_run_l_names_its_localisation_run_otherwise(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    state = GateState(records=[finished(
        RunSpec("L", "deterministic", [], tmp_path, tmp_path / "L", {}, None,
                tmp_path / "L.log", []))])
    run_l = Localiser(FOUND)

    localise(config, LocalLauncher(), state, divergent("forward"), run_l)

    assert run_l.specs[0].name == SPARE_RUN_NAME


def test_run_l_failing_to_run_is_recorded_not_raised(tmp_path: Path) -> None:
    def cancelled(spec: RunSpec) -> RunRecord:
        raise GateError("cancelled by SIGTERM", kind=ErrorKind.CANCELLED)

    def broken(spec: RunSpec) -> RunRecord:
        raise RuntimeError("no\nluck")

    config, first, second = config_in(tmp_path), divergent("forward"), divergent("forward")
    localise(config, LocalLauncher(), GateState(), first, cancelled)
    localise(config, LocalLauncher(), GateState(), second, broken)

    assert first["first_divergence"] is not None and second["first_divergence"] is not None
    assert first["first_divergence"]["module"] is None
    assert first["first_divergence"]["localisation"] == {
        "status": "failed", "run": "L", "note": "cancelled by SIGTERM"}
    assert second["first_divergence"]["localisation"]["note"].startswith(
        "run L could not run: RuntimeError: no")


def test_the_outermost_module_and_unchecked_calls_are_named(tmp_path: Path) -> None:
    spec = RunSpec("L", "deterministic", [], tmp_path, tmp_path, {}, None, tmp_path / "L.log",
                   [])
    Localiser({"step": 4, "checked": 3, "module": "", "class": "Net",
               "errors": ["conv1: not reentrant", 5]}, rank=1)(spec)

    found = outcome(finished(spec), step=4, rank=1)

    assert found["module"] == "Net"
    note = found["localisation"]["note"]
    assert note.startswith("run L ran the 3 module calls of step 4 on rank 1 again")
    assert "the outermost module (Net) is the first whose output changed, in its own code" in note
    assert note.endswith("; 1 not checked, e.g. conv1: not reentrant")


def test_no_usable_file_says_why_from_how_run_l_ended(tmp_path: Path) -> None:
    spec = RunSpec("L", "deterministic", [], tmp_path, tmp_path, {}, None, tmp_path / "L.log",
                   [])
    Localiser({"step": 3, "checked": 1, "module": "a"})(spec)  # another step's result

    clean = outcome(finished(spec), 4, 0)["localisation"]
    crashed = outcome(finished(spec, exit_code=1), 4, 0)["localisation"]
    timed_out = outcome(finished(spec, exit_code=None, timed_out=True), 4, 2)["localisation"]

    assert clean == {"status": "failed", "run": "L", "note": "run L wrote no usable"
                     " localise.json: no module was called under grad mode at step 4"}
    assert crashed["note"] == (f"run L exited with code 1 before step 4 was checked"
                               f" (log: {tmp_path / 'L.log'})")
    assert timed_out["note"] == f"run L timed out after 2.5 s (log: {tmp_path / 'L.log'})"
