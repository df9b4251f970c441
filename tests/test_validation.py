"""The shipped JSON Schemas and the one-line messages their violations become."""

from __future__ import annotations

import pytest

from repro_gate import validation


def test_schemas_are_loaded_by_name_with_their_file_name_as_id() -> None:
    schema = validation.load("config")

    assert schema["$id"] == "config.schema.json"
    assert schema["type"] == "object"


def test_each_violation_is_one_line_naming_the_key_and_the_rule() -> None:
    problems = validation.errors("config", {"runs": 1, "bogus": 2, "container": {"pids": -1}})

    assert problems == [
        "(top level): unknown key 'bogus'",
        "container.pids: must be an integer >= 1",
        "runs: must be an integer >= 2",
    ]
    assert validation.errors("config", {"runs": 3}) == []


def test_an_unknown_key_spelled_like_a_known_one_says_which() -> None:
    problems = validation.errors("config", {"tolerence": "bitwise", "cost": {"stpes": 3},
                                            "epochs": 2})

    assert problems == [
        "(top level): unknown key 'epochs', 'tolerence' (did you mean 'tolerance'?)",
        "cost: unknown key 'stpes' (did you mean 'steps'?)",
    ]


def test_a_float_that_looks_like_an_integer_is_not_an_integer() -> None:
    assert validation.errors("config", {"runs": 2.0}) == ["runs: must be an integer >= 2"]
    assert validation.errors("config", {"runs": True}) == ["runs: must be an integer >= 2"]


def test_non_string_keys_from_yaml_are_named_with_their_place() -> None:
    assert validation.errors("config", {1: "x", "env": {2: "y"}}) == [
        "(top level): key 1 must be a string",
        "env: key 2 must be a string",
    ]


def test_a_missing_required_key_is_named_with_its_path(
    manifest_current: dict[str, object],
) -> None:
    del manifest_current["verdict"]

    assert "verdict: is required" in validation.errors("manifest", manifest_current)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array", "items": {"type": "integer"}}, "a list of integers"),
        ({"type": "integer", "minimum": 1, "maximum": 5}, "an integer from 1 to 5"),
        ({"type": "number", "exclusiveMinimum": 0}, "a number > 0"),
        ({"enum": ["warn", "strict"]}, "one of warn, strict"),
        ({"oneOf": [{"const": "bitwise"}, {"type": "object"}]}, "'bitwise' or a mapping"),
        ({"type": ["string", "null"]}, "a string or null"),
        ({"type": "string", "minLength": 1}, "a non-empty string"),
        ({"type": "array", "minItems": 1, "items": {"type": "string"}},
         "a non-empty list of strings"),
        ({"x-rule": "a glob relative to the run directory"},
         "a glob relative to the run directory"),
    ],
)
def test_rule_puts_a_schema_in_words(schema: dict[str, object], words: str) -> None:
    assert validation.rule(schema) == words
