"""Parsing untrusted JSON and YAML within a size and an expanded-node budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from repro_gate import parsing

LAUGHS = (
    "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
)


def test_a_file_within_the_byte_budget_is_read_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    path.write_bytes("name: caf\u00e9\n".encode())

    assert parsing.read_text(path, max_bytes=len(path.read_bytes())) == "name: caf\u00e9\n"


def test_a_file_past_the_byte_budget_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * (1024 * 1024 + 1))

    with pytest.raises(parsing.OverBudget, match="larger than 1 MiB"):
        parsing.read_text(path, max_bytes=1024 * 1024)


def test_deeply_nested_json_is_over_budget_not_a_crash() -> None:
    assert parsing.load_json('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    with pytest.raises(parsing.OverBudget, match="nested too deeply"):
        parsing.load_json("[" * 200_000)


def test_aliases_are_weighed_at_their_expanded_size() -> None:
    # 10 + 10 * 11 + ... nodes: well within a large budget, far past a small one.
    loaded = parsing.load_yaml(LAUGHS)
    assert len(loaded["c"]) == 10 and loaded["c"][0][0] == list(range(1, 11))

    with pytest.raises(parsing.OverBudget, match="past 1,000 nodes"):
        parsing.load_yaml(LAUGHS, max_nodes=1000)


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(parsing.OverBudget, match="recursive"):
        parsing.load_yaml("&a [1, *a]")


def test_load_yaml_takes_exactly_one_document() -> None:
    with pytest.raises(yaml.YAMLError):
        parsing.load_yaml("a: 1\n---\nb: 2\n")


def test_load_yaml_all_reads_every_document_each_within_the_budget() -> None:
    text = "a: &x [1, 2]\nb: *x\n---\n- 3\n"

    assert parsing.load_yaml_all(text) == [{"a": [1, 2], "b": [1, 2]}, [3]]
    with pytest.raises(parsing.OverBudget):
        parsing.load_yaml_all("ok: 1\n---\n" + LAUGHS, max_nodes=1000)


def test_yaml_tags_that_build_python_objects_are_refused() -> None:
    with pytest.raises(yaml.YAMLError):
        parsing.load_yaml("!!python/object/apply:os.system ['true']")
