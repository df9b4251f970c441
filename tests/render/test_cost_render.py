"""The cost of determinism as users see it: never a bare figure the data cannot support, the
budget's verdict beside the reproducibility result, and where the cost comes from.

Every manifest is judged by the gate's own verdict functions and validated against the manifest
schema (tests/helpers/cost_manifests.py) before the console, the check run, the PR comment and
the step outputs are rendered from it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cost_manifests import cost, gate_manifest
from helpers.gate_cli import check, script

from repro_gate import validation
from repro_gate.gate import verdict
from repro_gate.manifest import versions
from repro_gate.publish import actions
from repro_gate.render import console, cost_text, markdown

BUDGET_WITHIN = {"max_pct": 10.0, "status": "within"}
BREAKDOWN = {
    "fill_uninitialized_memory": {"pct": 0.4, "ci95_pct": [-0.3, 1.1], "pairs": 6},
    "deterministic_kernels": {"pct": 2.7, "ci95_pct": [0.9, 4.5], "pairs": 6},
}
OPS = [
    {"name": "aten::cumsum", "det_ms": 0.9, "default_ms": 0.5},
    {"name": "aten::index_add_", "det_ms": 1.9, "default_ms": 0.3},
]
WIDE = "the 95% interval is 23.4 percentage points wide (limit 20)"


def cost_lines(manifest: dict) -> list[str]:
    """The console's cost line and the lines indented under it."""
    lines = console.render(manifest, None).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  cost of determinism"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")),
               len(lines))
    return lines[start:end]


def everything(manifest: dict) -> str:
    """Every text a user reads about this gate."""
    return "\n".join([
        console.render(manifest, None), markdown.title(manifest),
        markdown.summary_markdown(manifest), markdown.details_markdown(manifest),
        markdown.comment_markdown(manifest),
    ])


def test_a_measured_cost_comes_with_its_interval_and_its_pairs() -> None:
    manifest = gate_manifest(cost(3.1, [1.2, 5.0], budget=BUDGET_WITHIN), reproducible=True)
    figure = "+3.1% (95% interval +1.2% to +5.0%, 6 block pairs)"

    assert manifest["verdict"] == "pass"
    assert cost_lines(manifest) == [
        f"  cost of determinism: {figure}; within the 10% budget",
        "    step 41.2 ms deterministic vs 40.0 ms default (medians over blocks of 4 steps)",
    ]
    assert markdown.title(manifest) == (
        "bit-for-bit reproducible · determinism cost +3.1% (95% interval +1.2% to +5.0%)"
    )
    assert f"**Determinism cost:** {figure}; within the 10% budget" in (
        markdown.summary_markdown(manifest)
    )
    assert f"| Determinism cost | {figure}; within the 10% budget |" in (
        markdown.comment_markdown(manifest)
    )
    assert "- status: measured" in markdown.details_markdown(manifest)
    outputs = actions.outputs_for(manifest, None)
    assert (outputs["cost-pct"], outputs["cost-status"]) == ("3.10", "measured")


def test_an_inconclusive_cost_says_why_and_never_shows_its_point_figure() -> None:
    section = cost(7.7, [-4.0, 19.4], status="inconclusive", reason=WIDE, pairs=4,
                   budget={"max_pct": 10.0, "status": "inconclusive"})
    manifest = gate_manifest(section, reproducible=True)

    assert manifest["verdict"] == "pass"  # an inconclusive budget never fails a gate
    assert cost_lines(manifest) == [
        f"  cost of determinism: inconclusive ({WIDE}; 95% interval -4.0% to +19.4%,"
        " 4 block pairs); budget inconclusive: the cost is inconclusive, so the 10% budget cannot"
        " be judged",
    ]
    assert markdown.title(manifest) == "bit-for-bit reproducible · determinism cost inconclusive"
    assert "7.7" not in everything(manifest)
    outputs = actions.outputs_for(manifest, None)
    assert (outputs["cost-pct"], outputs["cost-status"]) == ("", "inconclusive")


def test_too_few_pairs_is_inconclusive_without_an_interval() -> None:
    reason = "only 1 block pair was timed (3 needed): the training ended after 12 steps"
    section = cost(6.83, None, status="inconclusive", reason=reason, pairs=1)
    manifest = gate_manifest(section, reproducible=True)

    assert cost_lines(manifest) == [f"  cost of determinism: inconclusive ({reason}; 1 block pair)"]
    assert "6.8" not in everything(manifest)


def test_over_budget_fails_a_reproducible_gate_and_says_both() -> None:
    section = cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"})
    manifest = gate_manifest(section, reproducible=True)
    over = ("the cost of determinism, +14.2% (95% interval +12.0% to +16.4%, 6 block pairs), is"
            " over the 10% budget: the whole interval lies above it")

    assert manifest["verdict"] == "fail"
    assert [r["code"] for r in manifest["reasons"]] == ["cost_over_budget", "bitwise_equal"]
    assert manifest["reasons"][0]["message"] == over
    report = console.render(manifest, None).splitlines()
    assert report[:3] == [
        "repro-gate: FAIL: reproducible, but over the cost budget",
        f"  {over}",
        "  2 deterministic runs are bitwise equal: 3 steps and 3 artifacts",
    ]
    assert markdown.title(manifest) == (
        "bit-for-bit reproducible, over the 10% cost budget · determinism cost +14.2%"
        " (95% interval +12.0% to +16.4%)"
    )
    summary = markdown.summary_markdown(manifest)
    assert summary.startswith("### ❌ repro-gate: bit-for-bit reproducible, over the 10% cost")
    assert f"- `cost_over_budget`: {over}" in summary
    assert actions.outputs_for(manifest, None)["verdict"] == "fail"


def test_over_budget_beside_a_divergence_comes_after_it() -> None:
    section = cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"})
    manifest = gate_manifest(section, reproducible=False)

    codes = [r["code"] for r in manifest["reasons"]]
    assert codes == ["trajectory_diverged", "artifact_different", "artifact_different",
                     "cost_over_budget"]
    assert console.render(manifest, None).startswith("repro-gate: FAIL: not reproducible\n")
    assert markdown.title(manifest).startswith("not reproducible · ")


@pytest.mark.parametrize("status", ["within", "inconclusive"])
@pytest.mark.parametrize("outcome", [verdict.PASS, verdict.FAIL])
def test_a_budget_not_exceeded_never_changes_the_verdict(status: str, outcome: str) -> None:
    section = cost(9.0, [1.0, 17.0], budget={"max_pct": 10.0, "status": status})
    reasons = [verdict.reason(verdict.BITWISE_EQUAL, "equal")]

    assert verdict.with_budget(outcome, reasons, section) == (outcome, reasons)
    assert verdict.with_budget(outcome, reasons, None) == (outcome, reasons)


def test_an_error_stays_an_error_over_budget() -> None:
    section = cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"})
    reasons = [verdict.reason("run_failed", "B exited with code 1")]

    assert verdict.with_budget(verdict.ERROR, reasons, section) == (verdict.ERROR, reasons)


def test_breakdown_and_ops_say_where_the_cost_comes_from() -> None:
    section = cost(3.1, [1.2, 5.0], breakdown=BREAKDOWN, ops=OPS)
    section["design"]["arms"] = ["deterministic", "deterministic_no_fill", "default"]
    manifest = gate_manifest(section, reproducible=True)

    assert cost_lines(manifest)[2:] == [
        "    where it comes from: filling uninitialised memory +0.4% (95% interval -0.3% to"
        " +1.1%, 6 block pairs), deterministic kernels +2.7% (95% interval +0.9% to +4.5%,"
        " 6 block pairs)",
        "    ops costing most: aten::index_add_ 1.9 ms deterministic vs 0.3 ms default;"
        " aten::cumsum 0.9 ms deterministic vs 0.5 ms default",
    ]
    for text in (markdown.summary_markdown(manifest), markdown.comment_markdown(manifest)):
        assert "**Where the cost of determinism comes from**" in text
        assert "- deterministic kernels: +2.7% (95% interval +0.9% to +4.5%, 6 block pairs)" in text
        assert "| `aten::index_add_` | 1.9 | 0.3 |" in text
        assert text.index("aten::index_add_") < text.index("aten::cumsum")


def test_a_share_without_a_narrow_interval_is_inconclusive_too() -> None:
    breakdown = {
        "fill_uninitialized_memory": {"pct": None, "ci95_pct": None, "pairs": 0},
        "deterministic_kernels": {"pct": 5.5, "ci95_pct": [-8.0, 19.0], "pairs": 4},
        "reason": "this torch has no torch.utils.deterministic.fill_uninitialized_memory",
    }
    manifest = gate_manifest(cost(3.1, [1.2, 5.0], breakdown=breakdown), reproducible=True)

    assert cost_lines(manifest)[2] == (
        "    where it comes from: filling uninitialised memory inconclusive (0 block pairs),"
        " deterministic kernels inconclusive (95% interval -8.0% to +19.0%, 4 block pairs);"
        " this torch has no torch.utils.deterministic.fill_uninitialized_memory"
    )
    assert "5.5" not in everything(manifest)


def test_no_cost_measured() -> None:
    manifest = gate_manifest(None, reproducible=True)

    assert cost_lines(manifest) == ["  cost of determinism: not measured"]
    assert "| Determinism cost | not measured |" in markdown.comment_markdown(manifest)
    outputs = actions.outputs_for(manifest, None)
    assert (outputs["cost-pct"], outputs["cost-status"]) == ("", "")


def test_the_reason_code_is_one_code_everywhere() -> None:
    assert verdict.COST_OVER_BUDGET == cost_text.OVER_BUDGET_CODE
    assert verdict.COST_OVER_BUDGET in verdict.REASON_CODES


def test_a_gate_over_its_budget_fails_with_exit_code_1_and_says_it_was_reproducible(
    project: Path,
) -> None:
    # 13 steps: 1 warm-up step, then 3 rounds of one 2-step block per arm. The training sleeps
    # 10x longer with determinism on, so the interval lies far above 10% on any machine; the
    # width limit is lifted so that a loaded machine cannot make it inconclusive.
    design = ["--cost-warmup", "1", "--cost-blocks", "3", "--cost-block-steps", "2",
              "--cost-max-width", "100000", "--cost-max-pct", "10"]
    result = check(project, *design, *script("slow_when_deterministic.py"))

    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    cost_section = manifest["cost"]
    assert (cost_section["status"], cost_section["budget"]) == (
        "measured", {"max_pct": 10.0, "status": "over"})
    assert cost_section["ci95_pct"][0] > 10.0
    assert manifest["verdict"] == "fail"
    assert [r["code"] for r in manifest["reasons"]] == ["cost_over_budget", "bitwise_equal"]
    assert result.stdout.startswith("repro-gate: FAIL: reproducible, but over the cost budget\n")
    figure = cost_text.figure(cost_text.read(cost_section))
    assert f"  cost of determinism: {figure}; over the 10% budget" in result.stdout


def test_a_figure_from_an_earlier_version_is_shown_as_inconclusive() -> None:
    document = gate_manifest(None, reproducible=True)
    document["schema_version"] = 2
    document["cost"] = {"pct": 41.7, "basis": "step_median", "det_step_seconds": 0.0412,
                        "default_step_seconds": 0.0291, "ci95_pct": [26.2, 56.7]}
    upgraded = versions.upgrade(document, 2)

    assert validation.errors("manifest", upgraded) == []
    assert cost_lines(upgraded) == [
        "  cost of determinism: inconclusive (measured across separate processes by an earlier"
        " version)"
    ]
    assert "41.7" not in everything(upgraded)
    assert actions.outputs_for(upgraded, None)["cost-pct"] == ""
