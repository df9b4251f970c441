"""The verdict and its reasons from typed comparisons, strict ops and the cost budget."""

from __future__ import annotations

from typing import Any

from repro_gate.compare.document import ArtifactResult, Comparison
from repro_gate.compare.status import Resume, Status
from repro_gate.gate.verdict import (
    ARTIFACT_DIFFERENT,
    ARTIFACT_MISSING,
    BITWISE_EQUAL,
    COST_OVER_BUDGET,
    ERROR,
    FAIL,
    NONDETERMINISTIC_OP_STRICT,
    PASS,
    RESUME_CHANGED,
    TRAJECTORY_DIVERGED,
    WITHIN_TOLERANCE,
    failures,
    reason,
    successes,
    with_budget,
)


def comparison(artifacts: list[ArtifactResult] | None = None, *, basis: str = "bitwise",
               steps: int = 10, divergence: dict[str, Any] | None = None) -> Comparison:
    return {
        "basis": basis,
        "artifacts": artifacts or [],
        "trajectory": {"steps_compared": steps,
                       "status": Status.DIFFERENT if divergence else Status.EQUAL},
        "first_divergence": divergence,
    }


DIVERGENCE = {"step": 3, "parameters": ["fc.weight"], "loss_differs": True, "rank": 0,
              "runs": ["A", "B"], "cause": "optimizer"}


def json_artifact(*keys: str, status: Status = Status.DIFFERENT) -> ArtifactResult:
    return {"path": "metrics.json", "kind": "json", "status": status,
            "keys": [{"key": key, "status": Status.DIFFERENT} for key in keys]}


def codes(reasons: list[Any]) -> list[str]:
    return [r["code"] for r in reasons]


def test_equal_runs_have_no_failure_and_are_bitwise_equal() -> None:
    equal = comparison([{"path": "model.pt", "kind": "torch", "status": Status.EQUAL}])

    assert failures(equal, []) == []
    assert successes(equal, 2) == [
        reason(BITWISE_EQUAL, "2 deterministic runs are bitwise equal: 10 steps and 1 artifacts")]
    assert successes(comparison(steps=0), 3, deterministic=False)[0]["message"] == (
        "3 runs are bitwise equal: 0 artifacts")


def test_a_bitwise_divergence_fails_but_under_a_tolerance_only_the_artifacts_decide() -> None:
    bitwise = comparison(divergence=DIVERGENCE)
    tolerant = comparison(basis="tolerance", divergence=DIVERGENCE)

    found = failures(bitwise, [])

    assert codes(found) == [TRAJECTORY_DIVERGED]
    assert found[0]["message"].startswith("runs A and B diverge at step 3 in the optimizer step")
    assert failures(tolerant, []) == []
    assert successes(tolerant, 2) == [reason(
        WITHIN_TOLERANCE, "2 deterministic runs agree within tolerance on 10 steps and 0"
        " artifacts; steps differ bitwise from step 3")]


def test_a_differing_checkpoint_names_its_runs_and_its_largest_tensor_difference() -> None:
    item: ArtifactResult = {
        "path": "model.pt", "kind": "torch", "status": Status.DIFFERENT, "runs": ["A", "C"],
        "tensors": [{"name": "w", "status": Status.DIFFERENT, "max_abs_diff": 0.25},
                    {"name": "b", "status": Status.DIFFERENT, "max_abs_diff": 0.5},
                    {"name": "c", "status": Status.EQUAL, "max_abs_diff": 9.0}],
    }

    assert failures(comparison([item]), []) == [reason(
        ARTIFACT_DIFFERENT,
        "model.pt differs between runs A and C (2 tensors, max abs diff 0.5)")]


def test_a_json_file_differing_only_in_timestamps_suggests_compare_ignore() -> None:
    one = failures(comparison([json_artifact("finished_at")]), [])[0]["message"]
    two = failures(comparison([json_artifact("run.start_time", "host")]), [])[0]["message"]
    many = failures(comparison([json_artifact(*(f"s{i}.date" for i in range(7)))]), [])

    assert one == ("metrics.json differs between runs A and B; only `finished_at` differs in"
                   " metrics.json: add it to `compare.ignore` if it is not a result")
    assert two.endswith("only `run.start_time`, `host` differ in metrics.json: add them to"
                        " `compare.ignore` if they are not results")
    assert "`s4.date` and 2 more differ" in many[0]["message"]


def test_no_hint_when_a_result_differs_or_the_file_is_not_structured() -> None:
    result = failures(comparison([json_artifact("finished_at", "loss")]), [])
    as_bytes = {**json_artifact("finished_at"), "kind": "bytes"}

    assert result[0]["message"] == "metrics.json differs between runs A and B"
    assert failures(comparison([as_bytes]), [])[0]["message"] == (
        "metrics.json differs between runs A and B")


def test_a_missing_artifact_names_the_run_that_has_it() -> None:
    missing: list[ArtifactResult] = [
        {"path": "a.pt", "kind": "bytes", "status": Status.MISSING_IN_A},
        {"path": "b.pt", "kind": "bytes", "status": Status.MISSING_IN_B},
    ]

    assert failures(comparison(missing), []) == [
        reason(ARTIFACT_MISSING, "a.pt is present in run B only"),
        reason(ARTIFACT_MISSING, "b.pt is present in run A only"),
    ]


def test_a_changed_resume_and_strict_ops_are_failures() -> None:
    changed = comparison()
    changed["resume"] = {"status": Resume.CHANGED, "resume_step": 4, "checkpoint": "ck.pt",
                         "first_divergence": None, "missing_state": None,
                         "note": "run R differs from run A from step 5"}
    ops = [{"op": "aten::index_add_", "file": "train.py", "line": 42},
           {"op": "aten::scatter_add_"}]

    found = failures(changed, ops)

    assert found == [
        reason(RESUME_CHANGED, "the resume check: run R differs from run A from step 5"),
        reason(NONDETERMINISTIC_OP_STRICT, "aten::index_add_ at train.py:42 has no deterministic"
               " implementation and determinism is strict"),
        reason(NONDETERMINISTIC_OP_STRICT, "aten::scatter_add_ has no deterministic"
               " implementation and determinism is strict"),
    ]


def test_within_tolerance_lists_the_files_and_their_bounds() -> None:
    item: ArtifactResult = {"path": "model.pt", "kind": "torch", "status": Status.WITHIN_TOLERANCE,
                            "tolerance": {"atol": 1e-6, "rtol": 0.001}}

    assert successes(comparison([item], steps=0), 2) == [reason(
        WITHIN_TOLERANCE, "2 deterministic runs agree within tolerance on 1 artifacts;"
        " not bitwise: model.pt (atol=1e-06, rtol=0.001)")]


OVER = {"status": "measured", "pct": 30.0, "ci95_pct": [25.0, 35.0],
        "budget": {"max_pct": 10.0, "status": "over"}}


def test_a_pass_over_the_cost_budget_fails_with_the_budget_first() -> None:
    passed = [reason(BITWISE_EQUAL, "equal")]

    outcome, reasons = with_budget(PASS, passed, OVER)

    assert outcome == FAIL
    assert codes(reasons) == [COST_OVER_BUDGET, BITWISE_EQUAL]
    assert reasons[0]["message"].startswith("the cost of determinism, ")


def test_a_fail_over_budget_keeps_its_failures_first() -> None:
    failed = [reason(ARTIFACT_DIFFERENT, "differs")]

    assert codes(with_budget(FAIL, failed, OVER)[1]) == [ARTIFACT_DIFFERENT, COST_OVER_BUDGET]


def test_the_budget_changes_nothing_within_it_without_it_or_after_an_error() -> None:
    within = {**OVER, "budget": {"max_pct": 50.0, "status": "within"}}
    passed = [reason(BITWISE_EQUAL, "equal")]

    assert with_budget(PASS, passed, within) == (PASS, passed)
    assert with_budget(PASS, passed, None) == (PASS, passed)
    assert with_budget(ERROR, passed, OVER) == (ERROR, passed)
