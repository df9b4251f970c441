"""Key paths of JSON/YAML documents and the `compare.ignore` patterns matched against them."""

from __future__ import annotations

import pytest

from repro_gate.compare.fields import ANY_INDEX, parse_path, parse_pattern, patterns_for
from repro_gate.config import CompareConfig


def test_a_reported_key_path_splits_into_names_and_indexes() -> None:
    assert parse_path('runs[0]."a.b".loss') == ("runs", 0, "a.b", "loss")
    assert parse_path('"say \\"hi\\""[12]') == ('say "hi"', 12)
    assert parse_path("top") == ("top",)


def test_a_pattern_keeps_wildcards_and_any_index() -> None:
    pattern = parse_pattern("runs[*].*_at")
    assert pattern.segments == ("runs", ANY_INDEX, "*_at")
    assert pattern.text == "runs[*].*_at"


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    ("timestamp", ("timestamp",), True),
    ("timestamp", ("run", "timestamp"), False),
    ("*_at", ("started_at",), True),
    ("*_at", ("started",), False),
    ("*.time", ("eval", "time"), True),
    ("*.time", (0, "time"), True),  # `*` matches a list index too
    ("[*].time", (3, "time"), True),
    ("[*].time", ("x", "time"), False),  # `[*]` matches only an index
    ("steps[2]", ("steps", 2), True),
    ("steps[2]", ("steps", 3), False),
    ("**.time", ("time",), True),  # none of the levels
    ("**.time", ("a", 0, "b", "time"), True),
    ("**.time", ("a", "time", "x"), False),
    ("meta.**", ("meta", "host", "name"), True),
])
def test_pattern_matching(pattern: str, path: tuple[str | int, ...], matches: bool) -> None:
    assert parse_pattern(pattern).matches(path) is matches


def test_a_quoted_name_matches_only_itself_wildcards_and_all() -> None:
    literal = parse_pattern('"a*b".x')
    assert literal.matches(("a*b", "x"))
    assert not literal.matches(("aZZb", "x"))
    assert parse_pattern('"host.name"').matches(parse_path('"host.name"'))


def test_the_patterns_of_every_matching_rule_add_up() -> None:
    policy = CompareConfig.from_document({"ignore": [
        {"glob": "metrics/*.json", "fields": ["time"]},
        {"glob": "*.json", "fields": ["**.host", "started_at"]},
        {"glob": "*.yaml", "fields": ["seed"]},
    ]})
    found = [p.text for p in patterns_for(policy, "metrics/eval.json")]
    assert found == ["time", "**.host", "started_at"]
    assert [p.text for p in patterns_for(policy, "deep/dir/config.yaml")] == ["seed"]
    assert patterns_for(policy, "model.pt") == ()
    assert patterns_for(CompareConfig(), "metrics/eval.json") == ()
