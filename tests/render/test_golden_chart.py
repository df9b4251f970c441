"""The PR comment charts the loss against the golden trajectory as a Mermaid `xychart-beta`
block GitHub renders: one point per step (at most 100), plain decimals, the first divergence
named."""

from __future__ import annotations

import re
from typing import Any

from helpers.manifest_docs import load_current
from markdown_it import MarkdownIt

from repro_gate.render import markdown

# The statements of an xychart-beta line chart, as Mermaid's grammar reads them.
NUMBER = r"-?\d+(?:\.\d+)?"
CHART = re.compile(
    r'xychart-beta\n'
    r'    title "(?P<title>[^"\n]*)"\n'
    rf'    x-axis "step" \[(?P<steps>\d+(?:, \d+)*)\]\n'
    r'    y-axis "(?P<axis>[^"\n]*)"\n'
    rf'    line \[(?P<values>{NUMBER}(?:, {NUMBER})*)\]\n$')


def golden(status: str, deltas: list[float], step: int | None, **more: Any) -> dict[str, Any]:
    return {
        "status": status, "path": ".repro-gate/golden/cpu-x86-64.json",
        "machine_class": "cpu-x86-64", "golden_machine_class": "cpu-x86-64",
        "bless_command": "repro-gate bless", "software_diff": [],
        "steps_compared": len(deltas), "artifacts_compared": 1,
        "first_divergence": None if step is None else {
            "step": step, "cause": "forward", "detail": "the loss differs"},
        "largest_difference": None,
        "loss_delta": [{"step": s, "delta": d} for s, d in enumerate(deltas, start=1)],
        "attribution": {"kind": "code", "reason": "same software"}, "against_base": None,
        **more,
    }


def comment_with(section: dict[str, Any] | None) -> str:
    manifest = load_current()
    manifest["comparison"]["golden"] = section
    return markdown.comment_markdown(manifest)


def charts(comment: str) -> list[re.Match[str]]:
    """Each fenced mermaid block of the comment, checked against the grammar."""
    blocks = [token.content for token in MarkdownIt("commonmark").parse(comment)
              if token.type == "fence" and token.info == "mermaid"]
    matches = [CHART.match(block) for block in blocks]
    assert all(matches), blocks
    return [match for match in matches if match]


def test_a_changed_loss_is_charted_step_by_step_with_its_first_divergence() -> None:
    deltas = [0.0, 0.0, 0.0125, -0.5, 0.25, 1e-9]
    [chart] = charts(comment_with(golden("changed", deltas, step=3)))
    assert chart["steps"].split(", ") == ["1", "2", "3", "4", "5", "6"]
    values = [float(value) for value in chart["values"].split(", ")]
    assert len(values) == 6 and values[:5] == deltas[:5] and abs(values[5]) < 1e-6
    assert "first divergence from it at step 3" in chart["title"]


def test_tiny_differences_are_scaled_and_a_long_run_is_drawn_in_100_points() -> None:
    deltas = [(step % 7) * 1e-7 for step in range(1, 1001)]
    deltas[499] = 9e-6  # the largest difference of its stretch is drawn
    [chart] = charts(comment_with(golden("within_tolerance", deltas, step=1)))
    steps = chart["steps"].split(", ")
    assert len(steps) == 100 and "500" in steps
    assert "(x1e-6)" in chart["axis"]
    assert "9" in chart["values"].split(", ")


def test_the_base_branch_golden_file_gets_its_own_chart() -> None:
    base = {"path": ".repro-gate/golden/cpu-x86-64.json", "status": "changed",
            "first_divergence": {"step": 2, "cause": "optimizer", "detail": ""},
            "largest_difference": {"what": "loss", "value": 0.5},
            "loss_delta": [{"step": 1, "delta": 0.0}, {"step": 2, "delta": 0.5}]}
    [chart] = charts(comment_with(golden("same", [0.0] * 4, None, against_base=base)))
    assert "base branch" in chart["title"] and "step 2" in chart["title"]


def test_no_chart_without_a_change() -> None:
    assert charts(comment_with(None)) == []
    assert charts(comment_with(golden("same", [0.0, 0.0], None))) == []
    assert charts(comment_with(golden("no_golden", [], None))) == []
