"""Reading what `diff` and `check --baseline` take: a manifest (migrated and validated) or a
fingerprint document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import as_v1, as_v3, write_json

from repro_gate.errors import ErrorKind, GateError
from repro_gate.manifest.documents import read_document
from repro_gate.manifest.versions import SCHEMA_VERSION


def error_of(path: Path, kind: ErrorKind = ErrorKind.INPUT) -> GateError:
    with pytest.raises(GateError) as raised:
        read_document(path, kind)
    return raised.value


def test_a_current_manifest_is_read_as_it_is(tmp_path: Path,
                                             manifest_current: dict[str, Any]) -> None:
    path = write_json(tmp_path / "manifest.json", manifest_current)

    assert read_document(path, ErrorKind.BASELINE) == manifest_current


def test_an_older_manifest_is_migrated_to_the_current_version(
    tmp_path: Path, manifest_current: dict[str, Any],
) -> None:
    path = write_json(tmp_path / "old.json", as_v3(manifest_current))

    document = read_document(path, ErrorKind.BASELINE)

    assert document["schema_version"] == SCHEMA_VERSION
    assert "seeding" in document["fingerprint"]["random"]


def test_a_version_1_manifest_has_no_fingerprint_to_diff(
    tmp_path: Path, manifest_current: dict[str, Any],
) -> None:
    error = error_of(write_json(tmp_path / "v1.json", as_v1(manifest_current)))

    assert error.kind == ErrorKind.INPUT
    assert error.message.endswith("manifest (schema_version 1) has no fingerprint")


def test_fingerprint_documents_are_taken_as_they_are(tmp_path: Path,
                                                     manifest_current: dict[str, Any]) -> None:
    fingerprint = manifest_current["fingerprint"]
    wrapped = write_json(tmp_path / "fp.json", {"config_hash": "x", "fingerprint": fingerprint})
    bare = write_json(tmp_path / "bare.json", fingerprint)

    assert read_document(wrapped, ErrorKind.INPUT)["fingerprint"] == fingerprint
    assert read_document(bare, ErrorKind.INPUT) == fingerprint


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"fingerprint": [1]}, "its 'fingerprint' is not an object"),
        ({"code": {}}, "neither a repro-gate manifest nor a fingerprint"),
        ({"schema_version": "5"}, "not a repro-gate manifest (schema_version '5')"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_anything_else_is_an_error_of_the_given_kind(tmp_path: Path, document: Any,
                                                     message: str) -> None:
    error = error_of(write_json(tmp_path / "doc.json", document), ErrorKind.BASELINE)

    assert error.kind == ErrorKind.BASELINE
    assert error.message == f"{tmp_path / 'doc.json'}: {message}"


def test_a_newer_manifest_is_refused_as_a_version_problem(tmp_path: Path,
                                                          manifest_current: dict[str, Any]
                                                          ) -> None:
    newer = {**manifest_current, "schema_version": SCHEMA_VERSION + 1}

    error = error_of(write_json(tmp_path / "new.json", newer), ErrorKind.BASELINE)

    assert error.kind == ErrorKind.MANIFEST_VERSION
    assert "upgrade repro-gate" in error.message


def test_an_invalid_current_manifest_names_the_violation(tmp_path: Path,
                                                         manifest_current: dict[str, Any]
                                                         ) -> None:
    manifest_current["verdict"] = "maybe"

    error = error_of(write_json(tmp_path / "bad.json", manifest_current))

    assert "not a valid manifest: verdict: must be" in error.message
