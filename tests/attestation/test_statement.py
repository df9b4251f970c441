"""The in-toto Statement a gate writes beside its manifest: run A's compared files as subjects,
the predicate alone beside it, none for a gate that ended in error, and the check that a
Statement is its manifest's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.attestation_docs import METRICS, MODEL, gate_document, sha256, write_gate

from repro_gate import manifest, validation
from repro_gate.attestation import statement
from repro_gate.attestation.predicate import PREDICATE_TYPE, SCHEMA_NAME
from repro_gate.errors import AttestationError


def test_a_passing_gate_writes_the_statement_and_its_predicate(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out")

    written = json.loads(gate.statement_path.read_text())
    predicate = json.loads((gate.output_dir / statement.PREDICATE_NAME).read_text())

    assert written["_type"] == "https://in-toto.io/Statement/v1"
    assert written["predicateType"] == PREDICATE_TYPE
    assert written["subject"] == [
        {"name": "model.bin", "digest": {"sha256": sha256(MODEL)}},
        {"name": "metrics.json", "digest": {"sha256": sha256(METRICS)}},
    ]
    assert written["predicate"] == predicate
    assert validation.errors(SCHEMA_NAME, predicate) == []
    assert predicate["verdict"] == "pass"
    assert predicate["compared"] == {
        "basis": "bitwise", "tolerance": None, "steps": 40, "trajectory": "equal",
        "artifacts": [{"path": "model.bin", "status": "equal"},
                      {"path": "metrics.json", "status": "equal"}]}
    assert predicate["launcher"] == "local"
    assert predicate["code"] == {"commit": "2f9c1e0b7a6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e",
                                 "dirty": False}
    assert predicate["environment"]["image_digest"] == "sha256:" + "ab" * 32
    assert predicate["environment"]["gpu_model"] == "NVIDIA A10G"
    assert predicate["environment"]["cudnn"] == "90100"
    assert predicate["gate"] == {"name": "repro-gate", "version": "0.1.0"}


def test_a_failed_gate_has_a_statement_that_says_so(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out", verdict="fail")

    written = json.loads(gate.statement_path.read_text())

    assert written["predicate"]["verdict"] == "fail"
    assert written["predicate"]["reasons"][0]["code"] == "artifact_different"


def test_a_gate_in_error_leaves_no_statement_not_even_an_earlier_one(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out")
    (gate.output_dir / statement.ENVELOPE_NAME).write_text("{}")  # signed after that gate
    document = gate_document(gate.output_dir)
    document["verdict"] = "error"

    assert statement.write(document, gate.output_dir) is None

    assert not gate.statement_path.exists()
    assert not (gate.output_dir / statement.PREDICATE_NAME).exists()
    assert not (gate.output_dir / statement.ENVELOPE_NAME).exists()


def test_a_statement_is_checked_against_its_manifest(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out")
    document = manifest.read(gate.manifest_path)
    read = statement.read(gate.statement_path)

    assert statement.check_against(read, document, "s.json") == read

    edited = json.loads(gate.statement_path.read_text())
    edited["subject"][0]["digest"]["sha256"] = "0" * 64
    with pytest.raises(AttestationError, match=r"s.json: not the statement of its manifest"
                                               r" \(subject differ\)"):
        statement.check_against(edited, document, "s.json")


def test_a_statement_that_is_no_json_object_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / statement.STATEMENT_NAME
    path.write_text("[1, 2]")

    with pytest.raises(AttestationError, match="not a JSON object"):
        statement.read(path)
    with pytest.raises(AttestationError, match="statement not found"):
        statement.read(tmp_path / "missing.json")


def test_the_payload_is_the_file_as_the_gate_wrote_it(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out")
    made = statement.build(manifest.read(gate.manifest_path))

    assert made is not None
    assert statement.payload(made) == gate.statement_path.read_bytes()
