"""The fields every manifest starts with, built in one place."""

from __future__ import annotations

from typing import TypedDict

from repro_gate import __version__
from repro_gate.manifest.versions import SCHEMA_MINOR, SCHEMA_VERSION

TOOL_NAME = "repro-gate"


class Tool(TypedDict):
    """The program that wrote the manifest."""

    name: str
    version: str


class Header(TypedDict):
    """`schema_version`, `schema_minor`, `tool`, `gate`, `started_at`, `finished_at` of a
    manifest."""

    schema_version: int
    schema_minor: int
    tool: Tool
    gate: str
    started_at: str
    finished_at: str


def header(gate: str, started_at: str, finished_at: str | None = None) -> Header:
    """The manifest header of gate `gate`; times are ISO 8601 strings.

    Without `finished_at` the gate finished as it started (one that could not start at all).
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "schema_minor": SCHEMA_MINOR,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "gate": gate,
        "started_at": started_at,
        "finished_at": started_at if finished_at is None else finished_at,
    }
