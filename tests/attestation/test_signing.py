"""Keys for the attestation: ECDSA P-256 and Ed25519 from PEM, every other key refused in one
line, and a key named by the SHA-256 of its public key."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from helpers.attestation_docs import write_keys, write_rsa_key

from repro_gate.attestation import signing
from repro_gate.errors import AttestationError


@pytest.mark.parametrize("kind", ["p256", "ed25519"])
def test_a_key_signs_and_its_public_half_checks(tmp_path: Path, kind: str) -> None:
    keys = write_keys(tmp_path, kind)
    private = signing.load_private(keys.private)
    public = signing.load_public(keys.public)

    signature = signing.sign(private, b"message")

    assert signing.signed_by(public, signature, b"message")
    assert not signing.signed_by(public, signature, b"messagE")
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    assert signing.key_id(public) == hashlib.sha256(der).hexdigest()


def test_other_keys_are_refused(tmp_path: Path) -> None:
    rsa = write_rsa_key(tmp_path / "rsa.pem")
    p384 = tmp_path / "p384.pem"
    p384.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))

    for path in (rsa, p384):
        with pytest.raises(AttestationError, match="not an ECDSA P-256 or Ed25519 key"):
            signing.load_private(path)


def test_an_encrypted_or_unreadable_key_is_one_line(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    encrypted = tmp_path / "encrypted.pem"
    encrypted.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")

    with pytest.raises(AttestationError, match="the key is encrypted"):
        signing.load_private(encrypted)
    with pytest.raises(AttestationError, match="not a PEM private key"):
        signing.load_private(garbage)
    with pytest.raises(AttestationError, match="not a PEM public key"):
        signing.load_public(garbage)
    with pytest.raises(AttestationError, match="public key not found"):
        signing.load_public(tmp_path / "missing.pem")
