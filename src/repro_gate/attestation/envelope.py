"""The DSSE envelope (github.com/secure-systems-lab/dsse, protocol v1) of a Statement.

A signature is made over the pre-authentication encoding (PAE) of the payload and its type,
never over the payload alone, so that a payload cannot be read as another type:

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

with LEN the length in bytes as ASCII decimal. The envelope holds the payload in base64, its
type, and the signatures, each with the key ID of its key.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from repro_gate.attestation import signing
from repro_gate.errors import AttestationError, ErrorKind, GateError
from repro_gate.manifest.store import load_object

PAYLOAD_TYPE = "application/vnd.in-toto+json"


class SignatureDocument(TypedDict):
    keyid: str
    sig: str  # base64


class EnvelopeDocument(TypedDict):
    payload: str  # base64
    payloadType: str
    signatures: list[SignatureDocument]


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def document(self) -> EnvelopeDocument:
        """The envelope as JSON writes it."""
        return {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [{"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
                           for s in self.signatures],
        }

    def signed_by(self, key: signing.PublicKey) -> bool:
        """Whether one of the signatures was made with the private half of `key`."""
        message = pae(self.payload_type, self.payload)
        return any(signing.signed_by(key, s.sig, message) for s in self.signatures)


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding of `body` with its type."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def sign(payload: bytes, key: signing.PrivateKey, payload_type: str = PAYLOAD_TYPE) -> Envelope:
    """An envelope of `payload` with one signature, made with `key`."""
    signature = signing.sign(key, pae(payload_type, payload))
    return Envelope(payload_type, payload,
                    (Signature(signing.key_id(key.public_key()), signature),))


def read(path: Path) -> Envelope:
    """The envelope in the file at `path`; an AttestationError when it is not one."""
    try:
        document = load_object(path, noun="attestation", kind=ErrorKind.ATTESTATION)
    except GateError as error:
        raise AttestationError(error.message) from None
    return parse(document, str(path))


def parse(document: Mapping[str, Any], source: str) -> Envelope:
    """An envelope from its JSON object (base64 standard or URL-safe, as DSSE allows)."""
    payload, payload_type = document.get("payload"), document.get("payloadType")
    signatures = document.get("signatures")
    if not (isinstance(payload, str) and isinstance(payload_type, str)
            and isinstance(signatures, list) and signatures):
        raise AttestationError(f"{source}: not a DSSE envelope (payload, payloadType and"
                               " signatures are required)")
    parsed = []
    for entry in signatures:
        if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
            raise AttestationError(f"{source}: a signature of the envelope has no sig")
        keyid = entry.get("keyid")
        parsed.append(Signature(keyid if isinstance(keyid, str) else "",
                                _base64(entry["sig"], source)))
    return Envelope(payload_type, _base64(payload, source), tuple(parsed))


def payload_json(envelope: Envelope, source: str) -> Mapping[str, Any]:
    """The payload as the JSON object it must be."""
    try:
        document = json.loads(envelope.payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise AttestationError(f"{source}: the payload is not JSON") from None
    if not isinstance(document, dict):
        raise AttestationError(f"{source}: the payload is not a JSON object")
    return document


def _base64(text: str, source: str) -> bytes:
    standard = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise AttestationError(f"{source}: not base64 where the envelope needs it") from None
