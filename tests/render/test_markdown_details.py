"""The check-run details in Markdown: the runs table, the differing tensors and the fields
`compare.ignore` left out, from a real-shaped manifest."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.paths import MANIFEST_FAIL

from repro_gate.render.markdown_details import ignored_details, runs_table, tensor_details
from repro_gate.render.markdown_text import TABLE_ROWS


def fixture() -> dict[str, Any]:
    return copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_one_row_per_run_with_why_it_stopped() -> None:
    manifest = fixture()
    manifest["runs"][2]["timed_out"] = True
    rows = table_rows(runs_table(manifest))
    assert rows == [
        "| `det-1` | deterministic | 0 | 40 | 152.4 s |  |",
        "| `det-2` | deterministic | 86 | 3 | 19.8 s | divergence |",
        "| `default-1` | default | 0 | 40 | 141.9 s | timed out |",
    ]
    assert runs_table(manifest).startswith("**Runs**\n\n| Run | Mode | Exit |")


def test_no_runs_gives_no_table() -> None:
    assert runs_table({"runs": []}) == ""
    assert runs_table({"runs": "det-1"}) == ""


def test_only_the_differing_tensors_are_listed() -> None:
    text = tensor_details(fixture())
    assert text.startswith("**`checkpoints/model.safetensors`**\n\n| Tensor | Status |")
    assert table_rows(text) == [
        "| `fc.weight` | different | 1931/131072 | 2.38e-07 | 4 |",
        "| `fc.bias` | different | 12/256 | 5.96e-08 | 1 |",
    ]
    assert "embed.weight" not in text
    assert "metrics.json" not in text  # compared by key, no tensors


def test_tensors_past_the_table_rows_are_cut() -> None:
    manifest = fixture()
    artifact = manifest["comparison"]["artifacts"][0]
    artifact["tensors"] = [
        {"name": f"layer{i}.weight", "status": "different", "differing_elements": 1,
         "total_elements": 4, "max_abs_diff": 0.5, "max_ulp": 2}
        for i in range(TABLE_ROWS + 5)
    ]
    assert len(table_rows(tensor_details(manifest))) == TABLE_ROWS


def test_a_name_with_a_pipe_keeps_the_table_whole() -> None:
    manifest = fixture()
    manifest["comparison"]["artifacts"][0]["tensors"][0]["name"] = "odd|name"
    row = table_rows(tensor_details(manifest))[0]
    assert row.startswith("| `odd\\|name` |")
    assert row.count(" | ") == 4


def test_ignored_fields_say_whether_they_differed() -> None:
    manifest = fixture()
    manifest["comparison"]["artifacts"][1]["ignored"] = [
        {"key": "finished_at", "differs": True}, {"key": "host", "differs": False}]
    text = ignored_details(manifest)
    assert text.startswith("**Fields not compared (`compare.ignore`)**")
    assert text.splitlines()[-2:] == [
        "| `metrics.json` | `finished_at` | yes |",
        "| `metrics.json` | `host` | no |",
    ]


def test_no_ignored_field_gives_no_section() -> None:
    assert ignored_details(fixture()) == ""


def test_many_ignored_fields_end_with_a_count() -> None:
    manifest = fixture()
    manifest["comparison"]["artifacts"][1]["ignored"] = [
        {"key": f"k{i}", "differs": False} for i in range(TABLE_ROWS + 2)]
    text = ignored_details(manifest)
    assert len(table_rows(text)) == TABLE_ROWS
    assert text.endswith("\n\n…and 2 more fields.")
