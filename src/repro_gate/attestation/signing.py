"""Keys and signatures: ECDSA P-256 (SHA-256, DER signatures) or Ed25519, from PEM files.

The signing itself is `cryptography`'s; this module only picks the algorithm that goes with a
key, and names a key by its key ID: the SHA-256 of its public key (DER SubjectPublicKeyInfo),
as hex, which is what `keyid` holds in an envelope's signatures.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from repro_gate.errors import AttestationError, one_line

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
KINDS = "an ECDSA P-256 or Ed25519 key"


def load_private(path: Path) -> PrivateKey:
    """The unencrypted PEM private key at `path`; an AttestationError for anything else."""
    data = _read(path, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise AttestationError(f"{path}: the key is encrypted; give an unencrypted PEM key"
                               " (docs/attestation.md#keys)") from None
    except (ValueError, UnsupportedAlgorithm) as error:
        raise AttestationError(f"{path}: not a PEM private key: {one_line(error)}") from None
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise AttestationError(f"{path}: not {KINDS}")


def load_public(path: Path) -> PublicKey:
    """The PEM public key at `path`; an AttestationError for anything else."""
    data = _read(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as error:
        raise AttestationError(f"{path}: not a PEM public key: {one_line(error)}") from None
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise AttestationError(f"{path}: not {KINDS}")


def key_id(key: PublicKey) -> str:
    """The key's ID: SHA-256 of its DER SubjectPublicKeyInfo, hex."""
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def sign(key: PrivateKey, message: bytes) -> bytes:
    """The signature of `message`."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(message)
    return key.sign(message, ec.ECDSA(hashes.SHA256()))


def signed_by(key: PublicKey, signature: bytes, message: bytes) -> bool:
    """Whether `signature` of `message` was made with the private half of `key`."""
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, message)
        else:
            key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise AttestationError(f"{path}: {what} not found") from None
    except OSError as error:
        raise AttestationError(f"{path}: cannot read: {one_line(error)}") from None
