"""The fields every manifest starts with."""

from __future__ import annotations

from repro_gate import __version__, validation
from repro_gate.manifest.header import TOOL_NAME, header
from repro_gate.manifest.versions import SCHEMA_MINOR, SCHEMA_VERSION


def test_the_header_names_the_schema_the_tool_and_the_gate() -> None:
    built = header("lm-gate", "2030-01-01T00:00:00+00:00", "2030-01-01T00:05:00+00:00")

    assert built == {
        "schema_version": SCHEMA_VERSION,
        "schema_minor": SCHEMA_MINOR,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "gate": "lm-gate",
        "started_at": "2030-01-01T00:00:00+00:00",
        "finished_at": "2030-01-01T00:05:00+00:00",
    }


def test_a_gate_that_could_not_start_finished_as_it_started() -> None:
    built = header("g", "2030-01-01T00:00:00+00:00")

    assert built["finished_at"] == built["started_at"]


def test_the_header_is_what_the_manifest_schema_asks_of_those_fields(
    manifest_current: dict[str, object],
) -> None:
    document = {**manifest_current, **header("g", "2030-01-01T00:00:00+00:00")}

    assert validation.errors("manifest", document) == []
    assert validation.errors("manifest", {**document, "tool": {"name": TOOL_NAME}}) != []
