"""The typed records of the manifest's `comparison` section name exactly the fields of their
`$defs` in manifest.schema.json: required keys required, every other key optional, none extra."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate import validation
from repro_gate.compare.document import (
    ArtifactResult,
    Comparison,
    ResumeComparison,
    ResumeDivergence,
    TrajectorySummary,
)
from repro_gate.compare.missing_state import MissingState
from repro_gate.compare.trajectory import FirstDivergence

DEFS = validation.load("manifest")["$defs"]


def nullable_object(schema: dict[str, Any]) -> dict[str, Any]:
    """The object branch of a `oneOf: [null, object]`."""
    return next(branch for branch in schema.get("oneOf", [schema]) if branch.get("type") != "null")


SCHEMAS = {
    "artifact_comparison": DEFS["artifact_comparison"],
    "comparison": DEFS["comparison"],
    "resume_comparison": DEFS["resume_comparison"],
    "first_divergence": DEFS["first_divergence"],
    "trajectory": DEFS["comparison"]["properties"]["trajectory"],
    "resume_divergence": nullable_object(
        DEFS["resume_comparison"]["properties"]["first_divergence"]),
    "missing_state": nullable_object(DEFS["resume_comparison"]["properties"]["missing_state"]),
}


@pytest.mark.parametrize(("record", "schema"), [
    (ArtifactResult, "artifact_comparison"),
    (Comparison, "comparison"),
    (ResumeComparison, "resume_comparison"),
    (TrajectorySummary, "trajectory"),
    (ResumeDivergence, "resume_divergence"),
    (MissingState, "missing_state"),
])
def test_a_record_s_keys_are_its_schema_s_properties(record: Any, schema: str) -> None:
    definition = SCHEMAS[schema]
    assert definition["additionalProperties"] is False
    assert record.__required_keys__ == set(definition["required"])
    assert record.__required_keys__ | record.__optional_keys__ == set(definition["properties"])


def test_the_first_divergence_carries_only_fields_the_schema_allows() -> None:
    definition = SCHEMAS["first_divergence"]
    keys = FirstDivergence.__required_keys__ | FirstDivergence.__optional_keys__
    assert keys == set(definition["properties"])
    # What the schema requires, every divergence the comparison makes has.
    assert set(definition["required"]) <= FirstDivergence.__required_keys__
