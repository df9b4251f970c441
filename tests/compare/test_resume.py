"""Run R, stopped at a checkpoint and resumed, against run A: same, within the tolerance or
changed, with the state not restored and the note, from state records as the probe writes them
(`resume_state.jsonl`), trajectories and artifact files of runs A and R."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.resume_records import state, step

from repro_gate.compare.missing_state import SENTENCES
from repro_gate.compare.resume import (
    ResumeEvidence,
    ResumePoint,
    compare_resume,
    headline,
    last_records,
    not_run,
)
from repro_gate.compare.run_pair import RunSide
from repro_gate.config import CompareConfig, ToleranceConfig


def evidence(r_steps: list[dict[str, Any]], states_r: list[dict[str, Any]] | None = None,
             artifacts_r: dict[str, Any] | None = None) -> ResumeEvidence:
    a_steps = [step(n) for n in range(1, 6)]
    states_a = [state(n) for n in range(1, 6)]
    return ResumeEvidence(RunSide("A", a_steps, {}), RunSide("R", r_steps, artifacts_r or {}),
                          {0: states_a}, {0: states_r or states_a})


POINT = ResumePoint(2, "/checkpoints/ckpt.pt")


def test_a_resumed_run_equal_to_a_is_the_same() -> None:
    # The probe stopped R at step 3's start; the resumed process recorded step 3 again.
    r_steps = [step(1), step(2), step(3, loss=9.0), step(3), step(4), step(5)]
    result = compare_resume(evidence(r_steps), POINT, ToleranceConfig(), CompareConfig())
    assert result == {"status": "same", "resume_step": 2, "checkpoint": "/checkpoints/ckpt.pt",
                      "first_divergence": None, "missing_state": None,
                      "note": "resumed after step 2, run R matches run A bitwise (5 steps and"
                              " the artifacts)"}


def test_a_resumed_run_that_diverges_is_changed_and_names_the_missing_state() -> None:
    r_steps = [step(1), step(2), step(3, loss=2.0), step(4, loss=2.0), step(5, loss=2.0)]
    states_r = [state(1), state(2), state(3, torch="reseeded"), state(4), state(5)]
    result = compare_resume(evidence(r_steps, states_r), POINT, ToleranceConfig(),
                            CompareConfig())
    assert result["status"] == "changed"
    assert result["first_divergence"] == {"step": 3, "rank": 0, "cause": "forward"}
    assert result["missing_state"] == {"kind": "rng", "generator": "torch"}
    assert result["note"] == "resumed after step 2, run R first differs at step 3"


def test_a_resumed_run_that_stops_early_is_changed() -> None:
    result = compare_resume(evidence([step(1), step(2), step(3)]), POINT, ToleranceConfig(),
                            CompareConfig())
    assert result["status"] == "changed"
    assert "different number of steps" in result["note"]


def test_not_run_says_why() -> None:
    assert not_run("runs A and B did not agree") == {
        "status": "not_run", "resume_step": None, "checkpoint": None, "first_divergence": None,
        "missing_state": None, "note": "runs A and B did not agree"}


def with_metrics(tmp_path: Path, loss_a: float, loss_r: float) -> ResumeEvidence:
    files = {}
    for name, loss in (("a", loss_a), ("r", loss_r)):
        path = tmp_path / name / "metrics.json"
        path.parent.mkdir()
        path.write_text(f'{{"loss": {loss}}}')
        files[name] = {"metrics.json": path}
    steps = [step(n) for n in range(1, 6)]
    states = {0: [state(n) for n in range(1, 6)]}
    return ResumeEvidence(RunSide("A", steps, files["a"]), RunSide("R", steps, files["r"]),
                          states, states)


def test_artifacts_within_the_tolerance_are_within_tolerance(tmp_path: Path) -> None:
    tolerance = ToleranceConfig.from_document({"atol": 1e-3})
    result = compare_resume(with_metrics(tmp_path, 0.5, 0.5001), POINT, tolerance,
                            CompareConfig())
    assert result["status"] == "within_tolerance"
    assert result["note"] == ("resumed after step 2, run R matches run A within the tolerance,"
                              " not bitwise")
    # Every recorded state was restored: the state that made the difference is not known.
    assert result["missing_state"] == {"kind": "unknown", "generator": None}


def test_a_differing_artifact_is_named_in_the_note(tmp_path: Path) -> None:
    result = compare_resume(with_metrics(tmp_path, 0.5, 0.7), POINT, ToleranceConfig(),
                            CompareConfig())
    assert result["status"] == "changed"
    assert result["first_divergence"] is None
    assert result["note"] == "resumed after step 2, run R metrics.json differ"


def test_an_ignored_field_does_not_change_the_resume(tmp_path: Path) -> None:
    policy = CompareConfig.from_document({"ignore": [{"glob": "*.json", "fields": ["loss"]}]})
    result = compare_resume(with_metrics(tmp_path, 0.5, 0.7), POINT, ToleranceConfig(), policy)
    assert result["status"] == "same"


def test_a_divergence_on_another_rank_names_the_rank() -> None:
    a = RunSide("A", [step(n) for n in range(1, 4)], {},
                other_ranks={1: [step(n) for n in range(1, 4)]})
    r = RunSide("R", [step(n) for n in range(1, 4)], {},
                other_ranks={1: [step(1), step(2), step(3, loss=2.0)]})
    states = {0: [state(n) for n in range(1, 4)], 1: [state(n) for n in range(1, 4)]}
    states_r = {0: states[0], 1: [state(1), state(2), state(3, numpy="other")]}
    result = compare_resume(ResumeEvidence(a, r, states, states_r), POINT, ToleranceConfig(),
                            CompareConfig())
    assert result["first_divergence"] == {"step": 3, "rank": 1, "cause": "forward"}
    assert result["note"] == "resumed after step 2, run R first differs at step 3 on rank 1"
    assert result["missing_state"] == {"kind": "rng", "generator": "numpy"}
    assert headline(result) == f"{result['note']}: {SENTENCES['rng/numpy']}"


def test_the_headline_of_a_same_resume_is_its_note() -> None:
    assert headline(not_run("the gate stopped before run R")) == "the gate stopped before run R"


def test_a_step_recorded_before_the_stop_and_after_the_resume_keeps_its_last_record() -> None:
    records = [step(1), step(2), step(3, loss=9.0), step(3), {"step": None}, step(4)]
    kept = last_records(records)
    assert [r["step"] for r in kept] == [1, 2, 3, 4]
    assert kept[2]["loss"] == 1.0

