"""Comparing JSON and YAML metric files key by key, and other files by bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from repro_gate import validation
from repro_gate.compare import Tolerance, compare_artifact, sha256_file


def validated(result: dict[str, Any]) -> dict[str, Any]:
    manifest = validation.load("manifest")
    registry = Registry().with_resource(manifest["$id"], Resource.from_contents(manifest))
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"{manifest['$id']}#/$defs/artifact_comparison"}, registry=registry
    )
    assert [error.message for error in validator.iter_errors(result)] == []
    return result


def compare_texts(
    tmp_path: Path, name: str, text_a: str, text_b: str, tolerance: Tolerance | None = None
) -> dict[str, Any]:
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "a" / name).write_text(text_a)
    (tmp_path / "b" / name).write_text(text_b)
    return validated(
        compare_artifact(tmp_path / "a" / name, tmp_path / "b" / name, name, tolerance)
    )


def test_json_numbers_compare_by_value(tmp_path: Path) -> None:
    a = {"loss": 1, "acc": 0.5, "nan": float("nan"), "name": "run", "flag": True}
    b = {"loss": 1.0, "acc": 0.5, "nan": float("nan"), "name": "run", "flag": True}

    result = compare_texts(tmp_path, "metrics.json", json.dumps(a), json.dumps(b, indent=2))

    assert (result["kind"], result["status"]) == ("json", "equal")
    assert "keys" not in result
    assert result["note"] == "5 of 5 values equal"


def test_json_differences_are_listed_by_key_path(tmp_path: Path) -> None:
    a = {"eval": {"per_class": [{"f1": 0.9}, {"f1": 0.8}]}, "steps": [1, 2, 3], "gone": 1}
    b = {"eval": {"per_class": [{"f1": 0.9}, {"f1": 0.7}]}, "steps": [1, 2], "new": "x"}

    result = compare_texts(tmp_path, "eval.json", json.dumps(a), json.dumps(b))

    assert result["status"] == "different"
    assert result["keys"] == [
        {
            "key": "eval.per_class[1].f1",
            "status": "different",
            "a": 0.8,
            "b": 0.7,
            "abs_diff": pytest.approx(0.1),
        },
        {"key": "steps[2]", "status": "missing_in_b", "a": 3},
        {"key": "gone", "status": "missing_in_b", "a": 1},
        {"key": "new", "status": "missing_in_a", "b": "x"},
    ]


def test_json_tolerance_separates_small_and_large_float_differences(tmp_path: Path) -> None:
    a = json.dumps({"loss": 0.25, "acc": 0.9})
    b = json.dumps({"loss": 0.2500001, "acc": 0.8})

    result = compare_texts(tmp_path, "m.json", a, b, Tolerance(atol=1e-6))
    only_small = compare_texts(
        tmp_path, "s.json", a, json.dumps({"loss": 0.2500001, "acc": 0.9}), Tolerance(atol=1e-6)
    )

    assert result["status"] == "different"
    assert [(k["key"], k["status"]) for k in result["keys"]] == [
        ("loss", "within_tolerance"),
        ("acc", "different"),
    ]
    assert result["tolerance"] == {"atol": 1e-6, "rtol": 0.0}
    assert only_small["status"] == "within_tolerance"


def test_types_are_not_confused(tmp_path: Path) -> None:
    result = compare_texts(
        tmp_path,
        "m.json",
        json.dumps({"x": True, "y": "1", "z": {"k": 1}}),
        json.dumps({"x": 1, "y": 1, "z": [1]}),
    )

    assert result["keys"] == [
        {"key": "x", "status": "different", "a": True, "b": 1},
        {"key": "y", "status": "different", "a": "1", "b": 1},
        {"key": "z", "status": "different", "a": "<mapping with 1 keys>", "b": "<list of 1 items>"},
    ]


def test_keys_with_dots_are_quoted_in_paths(tmp_path: Path) -> None:
    result = compare_texts(tmp_path, "m.json", '{"lr.max": {"a.b": 1}}', '{"lr.max": {"a.b": 2}}')

    assert [key["key"] for key in result["keys"]] == ['"lr.max"."a.b"']


def test_yaml_is_compared_by_key(tmp_path: Path) -> None:
    a = "train:\n  loss: 0.5\n  epochs: 3\nnotes: [a, b]\n"
    b = "train:\n  loss: 0.50\n  epochs: 4\nnotes: [a, c]\n"

    result = compare_texts(tmp_path, "summary.yml", a, b)

    assert (result["kind"], result["status"]) == ("yaml", "different")
    assert [(k["key"], k.get("a"), k.get("b")) for k in result["keys"]] == [
        ("train.epochs", 3, 4),
        ("notes[1]", "b", "c"),
    ]


def test_yaml_never_builds_python_objects(tmp_path: Path) -> None:
    text = "x: !!python/object/apply:os.system ['true']\n"

    result = compare_texts(tmp_path, "evil.yaml", text, text)

    assert (result["kind"], result["status"]) == ("bytes", "equal")
    assert result["note"].startswith("not valid YAML (")


def test_unparseable_json_falls_back_to_bytes(tmp_path: Path) -> None:
    result = compare_texts(tmp_path, "m.json", '{"loss": 1', '{"loss": 2')

    assert (result["kind"], result["status"]) == ("bytes", "different")
    assert result["note"].startswith("not valid JSON (")
    assert result["note"].endswith("compared by bytes")


def test_other_files_compare_by_sha256(tmp_path: Path) -> None:
    equal = compare_texts(tmp_path, "log.jsonl", '{"a": 1}\n', '{"a": 1}\n')
    different = compare_texts(tmp_path, "out.txt", "one\n", "two\n")

    assert (equal["kind"], equal["status"]) == ("bytes", "equal")
    assert equal["sha256_a"] == hashlib.sha256(b'{"a": 1}\n').hexdigest()
    assert different["status"] == "different"
    assert different["sha256_b"] == hashlib.sha256(b"two\n").hexdigest()
    assert "tolerance" not in different


def test_sha256_file_streams_large_files(tmp_path: Path) -> None:
    data = bytes(range(256)) * (3 * 1024 * 1024 // 256 * 3 + 7)  # spans several chunks
    path = tmp_path / "big.dat"
    path.write_bytes(data)

    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert sha256_file(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()
