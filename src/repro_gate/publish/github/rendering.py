"""What is posted for a document: the titles, texts and verdict the reporter takes from it.

The gate's manifest by default (`GATE_RENDERING`); the upgrade check (publish/upgrade_report.py)
posts its own report through the same channels with its own `Rendering`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from repro_gate.render import markdown

Render = Callable[[Mapping[str, Any]], str]


def _gate_verdict(manifest: Mapping[str, Any]) -> str:
    return str(manifest.get("verdict"))


def _gate_ops(manifest: Mapping[str, Any]) -> list[Any]:
    return list(manifest.get("nondeterministic_ops") or [])


@dataclass(frozen=True)
class Rendering:
    """What is posted for a document: the gate's manifest by default; the upgrade check
    (publish/upgrade_report.py) posts its own report through the same channels."""

    name: Callable[[str], str] = str  # the gate's name -> check-run name and status context
    marker: Callable[[str], str] = markdown.comment_marker  # finds the sticky comment again
    title: Render = markdown.title
    summary: Render = markdown.summary_markdown
    details: Render | None = markdown.details_markdown  # the check run's `text`; None: none
    comment: Render = markdown.comment_markdown  # the comment's body, marker included
    verdict: Render = _gate_verdict  # pass, fail or error: the conclusion and status state
    ops: Callable[[Mapping[str, Any]], list[Any]] = _gate_ops  # annotated on the check run


GATE_RENDERING = Rendering()


def as_posted(manifest: Mapping[str, Any], run_url: str | None) -> dict[str, Any]:
    """The manifest as the posted texts render it: with its run's link, no longer deferred."""
    return {**manifest, "reporting": {"run_url": run_url, "deferred": False}}
