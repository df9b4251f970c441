"""The check-run details: the runs, tensor-level differences and the fields `compare.ignore` left
out (the determinism cost's figures are in `markdown_cost`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.status import UNFAILING
from repro_gate.render.markdown_text import (
    TABLE_ROWS,
    as_list,
    as_mapping,
    cell,
    more_text,
    number_text,
    seconds,
)


def runs_table(manifest: Mapping[str, Any]) -> str:
    """One row per run: mode, exit code, steps, wall time and why it stopped."""
    runs = [as_mapping(r) for r in as_list(manifest.get("runs"))]
    if not runs:
        return ""
    rows = [
        f"| `{cell(r.get('name', '?'))}` | {r.get('mode', '')} | {r.get('exit_code')} |"
        f" {r.get('steps', '')} | {seconds(r.get('wall_seconds'))} |"
        f" {'timed out' if r.get('timed_out') else (r.get('stopped') or '')} |"
        for r in runs
    ]
    return (
        "**Runs**\n\n| Run | Mode | Exit | Steps | Wall | Stopped |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )


def tensor_details(manifest: Mapping[str, Any]) -> str:
    """Per artifact, the tensors that differ, with their largest differences."""
    sections = []
    for artifact in as_list(as_mapping(manifest.get("comparison")).get("artifacts")):
        artifact = as_mapping(artifact)
        differing = [
            as_mapping(t)
            for t in as_list(artifact.get("tensors"))
            if as_mapping(t).get("status") not in UNFAILING
        ]
        if not differing:
            continue
        rows = [
            f"| `{cell(t.get('name', '?'))}` | {t.get('status', '')} |"
            f" {t.get('differing_elements', '')}/{t.get('total_elements', '')} |"
            f" {number_text(t.get('max_abs_diff'))} | {number_text(t.get('max_ulp'))} |"
            for t in differing[:TABLE_ROWS]
        ]
        sections.append(
            f"**`{cell(artifact.get('path', '?'))}`**\n\n"
            "| Tensor | Status | Differing | Max abs diff | Max ULP |\n|---|---|---|---|---|\n"
            + "\n".join(rows)
        )
    return "\n\n".join(sections)


def ignored_details(manifest: Mapping[str, Any]) -> str:
    """Every field `compare.ignore` left out of an artifact, and whether it differed."""
    rows = []
    for artifact in as_list(as_mapping(manifest.get("comparison")).get("artifacts")):
        path = cell(as_mapping(artifact).get("path", "?"))
        for field in map(as_mapping, as_list(as_mapping(artifact).get("ignored"))):
            differs = "yes" if field.get("differs") else "no"
            rows.append(f"| `{path}` | `{cell(field.get('key', '?'))}` | {differs} |")
    if not rows:
        return ""
    return (
        "**Fields not compared (`compare.ignore`)**\n\n| Artifact | Field | Differs |\n"
        "|---|---|---|\n" + "\n".join(rows[:TABLE_ROWS]) + more_text(len(rows), "fields")
    )
