"""The cost of determinism in Markdown: the sentence, the title's figure, where the cost comes
from, and the figures behind it, from manifests judged by the gate's own verdict functions."""

from __future__ import annotations

from helpers.cost_manifests import NOTE, cost, gate_manifest

from repro_gate.render import markdown_cost

BUDGET = {"max_pct": 10.0, "status": "within"}
BREAKDOWN = {
    "fill_uninitialized_memory": {"pct": 0.4, "ci95_pct": [-0.3, 1.1], "pairs": 6},
    "deterministic_kernels": {"pct": 2.7, "ci95_pct": [0.9, 4.5], "pairs": 6},
}


def test_no_cost_gives_no_text_anywhere() -> None:
    manifest = gate_manifest(None, reproducible=True)
    assert markdown_cost.cost_sentence(manifest) == ""
    assert markdown_cost.cost_title(manifest) == ""
    assert markdown_cost.budget_limit(manifest) == ""
    assert markdown_cost.cost_section(manifest) == ""
    assert markdown_cost.cost_details(manifest) == ""


def test_sentence_title_and_budget_of_a_measured_cost() -> None:
    manifest = gate_manifest(cost(3.1, [1.2, 5.0], budget=BUDGET), reproducible=True)
    assert markdown_cost.cost_sentence(manifest) == (
        "+3.1% (95% interval +1.2% to +5.0%, 6 block pairs); within the 10% budget")
    assert markdown_cost.cost_title(manifest) == "+3.1% (95% interval +1.2% to +5.0%)"
    assert markdown_cost.budget_limit(manifest) == "10% "


def test_a_cost_without_breakdown_or_ops_has_no_section() -> None:
    assert markdown_cost.cost_section(gate_manifest(cost(3.1, [1.2, 5.0]),
                                                    reproducible=True)) == ""


def test_the_section_lists_the_shares_and_the_ops_costing_most() -> None:
    ops = [{"name": "aten::cumsum", "det_ms": 0.9, "default_ms": 0.5},
           {"name": "aten::index|add", "det_ms": 1.9, "default_ms": 0.3}]
    section = cost(3.1, [1.2, 5.0], breakdown=BREAKDOWN, ops=ops)
    section["design"]["arms"] = ["deterministic", "deterministic_no_fill", "default"]
    text = markdown_cost.cost_section(gate_manifest(section, reproducible=True))
    parts = text.split("\n\n")
    assert parts[0] == "**Where the cost of determinism comes from**"
    assert parts[1].splitlines() == [
        "- filling uninitialised memory: +0.4% (95% interval -0.3% to +1.1%, 6 block pairs)",
        "- deterministic kernels: +2.7% (95% interval +0.9% to +4.5%, 6 block pairs)",
    ]
    assert parts[2].splitlines()[2:] == [
        "| `aten::index\\|add` | 1.9 | 0.3 |",  # the largest first; its pipe escaped
        "| `aten::cumsum` | 0.9 | 0.5 |",
    ]


def test_the_ops_table_is_cut_to_its_maximum() -> None:
    ops = [{"name": f"aten::op{i}", "det_ms": 1.0 + i, "default_ms": 1.0}
           for i in range(markdown_cost.MAX_OPS + 3)]
    text = markdown_cost.cost_section(gate_manifest(cost(3.1, [1.2, 5.0], ops=ops),
                                                    reproducible=True))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == markdown_cost.MAX_OPS
    assert rows[0].startswith(f"| `aten::op{markdown_cost.MAX_OPS + 2}` |")


def test_the_details_list_every_figure_behind_the_cost() -> None:
    manifest = gate_manifest(cost(3.1, [1.2, 5.0], budget=BUDGET), reproducible=True)
    lines = markdown_cost.cost_details(manifest).splitlines()
    assert lines[:2] == ["**Determinism cost**", ""]
    assert lines[2:] == [
        "- status: measured",
        "- cost: +3.1% (95% interval +1.2% to +5.0%, 6 block pairs)",
        "- budget: within the 10% budget",
        "- deterministic step (median): 0.0412 s",
        "- default step (median): 0.04 s",
        "- arms: deterministic, default",
        "- block steps: 4",
        "- blocks: 6",
        "- pairs: 6",
        "- warmup steps: 3",
        "- widest interval reported as measured: 20 percentage points",
        f"- note: {NOTE}",
    ]


def test_the_details_of_an_inconclusive_cost_give_the_reason_not_the_figure() -> None:
    reason = "only 1 block pair was timed (3 needed)"
    manifest = gate_manifest(cost(6.83, None, status="inconclusive", reason=reason, pairs=1),
                             reproducible=True)
    details = markdown_cost.cost_details(manifest)
    assert f"- reason: {reason}" in details
    assert f"- cost: inconclusive ({reason}; 1 block pair)" in details
    assert "6.8" not in details


def test_the_details_say_when_the_probe_stopped_early() -> None:
    section = cost(3.1, [1.2, 5.0], pairs=8)
    section["design"] = {**section["design"], "blocks": 16, "stopped_after_pairs": 8}
    details = markdown_cost.cost_details(gate_manifest(section, reproducible=True))
    assert "- blocks: 16\n- pairs: 8\n- stopped after pairs: 8\n" in details
