"""`verify`'s checks on a signed Statement: the signature over the envelope as it is, the
predicate type, a passing verdict, and files matched to subjects by digest."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.attestation_docs import MODEL, sha256, write_gate, write_keys

from repro_gate.attestation import envelope, signing, statement, verification
from repro_gate.attestation.predicate import PREDICATE_TYPE


def signed_statement(tmp_path: Path, verdict: str = "pass", **changes: object
                     ) -> tuple[envelope.Envelope, signing.PublicKey]:
    gate = write_gate(tmp_path / "out", verdict)
    document = json.loads(gate.statement_path.read_text())
    document.update(changes)
    keys = write_keys(tmp_path / "keys", "ed25519")
    payload = json.dumps(document).encode()
    return envelope.sign(payload, signing.load_private(keys.private)), keys.public_key


def test_a_file_is_matched_by_its_digest_whatever_its_name(tmp_path: Path) -> None:
    signed, key = signed_statement(tmp_path)
    copy = tmp_path / "renamed.ckpt"

    result = verification.verify(signed, key, {copy: sha256(MODEL)}, "a.json")

    assert result.passed
    assert result.attested == [verification.Attested(copy, sha256(MODEL), "model.bin")]


def test_a_digest_that_is_no_subject_is_named(tmp_path: Path) -> None:
    signed, key = signed_statement(tmp_path)

    result = verification.verify(signed, key, {Path("other.bin"): "0" * 64}, "a.json")

    assert not result.passed
    assert result.problems == [f"other.bin: sha256 {'0' * 64} is not attested by a.json"]


def test_a_failed_gate_or_another_predicate_type_is_refused(tmp_path: Path) -> None:
    failed, key = signed_statement(tmp_path / "fail", verdict="fail")
    other, other_key = signed_statement(tmp_path / "other", predicateType="https://x/v1")

    refused = verification.verify(failed, key, {Path("m"): sha256(MODEL)}, "f.json")
    foreign = verification.verify(other, other_key, {Path("m"): sha256(MODEL)}, "o.json")

    assert refused.problems == ["f.json: the statement of a gate whose verdict is fail, not pass"]
    assert foreign.problems == [f"o.json: predicate type 'https://x/v1', not {PREDICATE_TYPE}"]
    assert refused.attested == foreign.attested == []


def test_an_edited_payload_or_another_key_is_a_bad_signature(tmp_path: Path) -> None:
    signed, key = signed_statement(tmp_path)
    other = write_keys(tmp_path / "other", "p256").public_key
    edited = envelope.Envelope(signed.payload_type,
                               signed.payload.replace(b'"pass"', b'"fail"'), signed.signatures)

    for candidate, with_key in ((edited, key), (signed, other)):
        result = verification.verify(candidate, with_key, {Path("m"): sha256(MODEL)}, "a.json")
        assert len(result.problems) == 1
        assert result.problems[0].startswith("a.json: bad signature: no signature verifies")


def test_a_statement_type_is_checked_before_its_subjects(tmp_path: Path) -> None:
    signed, key = signed_statement(tmp_path, _type="https://in-toto.io/Statement/v0.1")

    result = verification.verify(signed, key, {Path("m"): sha256(MODEL)}, "a.json")

    assert result.problems == ["a.json: not an in-toto Statement v1"
                               " (_type 'https://in-toto.io/Statement/v0.1')"]
    assert statement.STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
