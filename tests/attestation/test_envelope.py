"""The DSSE envelope: its PAE as the DSSE protocol spells it, signatures that a plain
`cryptography` check accepts, and envelopes read back (standard or URL-safe base64)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from helpers.attestation_docs import write_keys

from repro_gate.attestation import envelope, signing
from repro_gate.errors import AttestationError

PAYLOAD = b'{"_type": "https://in-toto.io/Statement/v1"}\n'


def dsse_pae(payload_type: str, body: bytes) -> bytes:
    """PAE written out from the DSSE protocol, independently of the code under test."""
    kind = payload_type.encode("utf-8")
    return b" ".join([b"DSSEv1", str(len(kind)).encode("ascii"), kind,
                      str(len(body)).encode("ascii"), body])


def test_pae_is_the_protocols_encoding() -> None:
    assert envelope.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")
    assert envelope.pae("t", b"") == b"DSSEv1 1 t 0 "
    assert envelope.pae(envelope.PAYLOAD_TYPE, PAYLOAD) == dsse_pae(envelope.PAYLOAD_TYPE, PAYLOAD)


@pytest.mark.parametrize("kind", ["p256", "ed25519"])
def test_a_signature_verifies_with_the_public_key_alone(tmp_path: Path, kind: str) -> None:
    keys = write_keys(tmp_path, kind)

    document = envelope.sign(PAYLOAD, signing.load_private(keys.private)).document()

    assert document["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(document["payload"]) == PAYLOAD
    [entry] = document["signatures"]
    assert entry["keyid"] == signing.key_id(keys.public_key)
    message = dsse_pae(document["payloadType"], base64.b64decode(document["payload"]))
    public = keys.public_key
    if isinstance(public, ec.EllipticCurvePublicKey):
        public.verify(base64.b64decode(entry["sig"]), message, ec.ECDSA(hashes.SHA256()))
    else:
        assert isinstance(public, ed25519.Ed25519PublicKey)
        public.verify(base64.b64decode(entry["sig"]), message)


def test_an_envelope_read_back_is_checked_by_its_signatures(tmp_path: Path) -> None:
    keys = write_keys(tmp_path, "ed25519")
    other = write_keys(tmp_path / "other", "ed25519")
    document = envelope.sign(PAYLOAD, signing.load_private(keys.private)).document()
    path = tmp_path / "envelope.json"
    path.write_text(json.dumps(document))

    signed = envelope.read(path)
    edited = envelope.Envelope(signed.payload_type, PAYLOAD.replace(b"v1", b"v2"),
                               signed.signatures)

    assert signed.payload == PAYLOAD
    assert signed.signed_by(keys.public_key)
    assert not signed.signed_by(other.public_key)
    assert not edited.signed_by(keys.public_key)


def test_url_safe_base64_is_read_too(tmp_path: Path) -> None:
    keys = write_keys(tmp_path, "p256")
    document = envelope.sign(b"\xfb\xff" * 3, signing.load_private(keys.private),
                             payload_type="t").document()
    document["payload"] = base64.urlsafe_b64encode(b"\xfb\xff" * 3).decode().rstrip("=")

    assert envelope.parse(document, "e.json").payload == b"\xfb\xff" * 3


@pytest.mark.parametrize("document, message", [
    ({"payload": "e30=", "payloadType": "t", "signatures": []}, "not a DSSE envelope"),
    ({"payloadType": "t", "signatures": [{"sig": "AA=="}]}, "not a DSSE envelope"),
    ({"payload": "e30=", "payloadType": "t", "signatures": [{"keyid": "k"}]}, "has no sig"),
    ({"payload": "*not base64*", "payloadType": "t", "signatures": [{"sig": "AA=="}]},
     "not base64"),
])
def test_what_is_no_envelope_is_one_line(document: dict[str, object], message: str) -> None:
    with pytest.raises(AttestationError, match=message):
        envelope.parse(document, "e.json")


def test_a_payload_that_is_no_json_object_is_named(tmp_path: Path) -> None:
    signed = envelope.Envelope("t", b"[1]", ())

    with pytest.raises(AttestationError, match=r"e\.json: the payload is not a JSON object"):
        envelope.payload_json(signed, "e.json")
