"""Gates' records for the attestation's tests: a real manifest whose run A left its files, the
Statement the gate writes beside it, and signing keys made on the spot."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from helpers.manifest_docs import load_current
from repro_gate import manifest
from repro_gate.attestation import statement

# Run A's files: one in its working copy (a checkpoint), one in its run directory.
MODEL = b"weights of a reproducible model\n"
METRICS = b'{"final_loss": 0.25}\n'


@dataclass(frozen=True)
class Gate:
    """A gate's output directory: its manifest, and run A's files."""

    output_dir: Path
    manifest_path: Path
    model: Path  # run A's checkpoint, `model.bin` relative to the working directory
    metrics: Path

    @property
    def statement_path(self) -> Path:
        return self.output_dir / statement.STATEMENT_NAME


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gate_document(output_dir: Path, verdict: str = "pass") -> dict[str, Any]:
    """A manifest of a gate that compared run A's `model.bin` and `metrics.json` with run B's."""
    document: dict[str, Any] = load_current()
    run_dir = output_dir / "runs" / "det-1"
    document["output_dir"] = str(output_dir)
    document["verdict"] = verdict
    document["reasons"] = (
        [{"code": "bitwise_equal", "message": "2 runs are bitwise equal"}] if verdict == "pass"
        else [{"code": "artifact_different", "message": "1 of 2 artifacts differ"}])
    files = {"model.bin": MODEL, "metrics.json": METRICS}
    for run in document["runs"][:2]:
        run["artifacts"] = [{"path": path, "sha256": sha256(data), "bytes": len(data)}
                            for path, data in files.items()]
    document["runs"][0]["run_dir"] = str(run_dir)
    document["comparison"]["artifacts"] = [
        {"path": path, "kind": "bytes", "runs": ["det-1", "det-2"],
         "status": "equal" if verdict == "pass" or path != "model.bin" else "different",
         "sha256_a": sha256(data), "sha256_b": sha256(data)}
        for path, data in files.items()]
    document["comparison"]["trajectory"] = {"steps_compared": 40, "status": "equal"}
    document["comparison"]["first_divergence"] = None
    return document


def write_gate(output_dir: Path, verdict: str = "pass") -> Gate:
    """The gate's records as the gate leaves them: run A's files, the manifest, the Statement."""
    run_dir = output_dir / "runs" / "det-1"
    (run_dir / "work").mkdir(parents=True)
    model = run_dir / "work" / "model.bin"
    model.write_bytes(MODEL)
    metrics = run_dir / "metrics.json"
    metrics.write_bytes(METRICS)
    document = gate_document(output_dir, verdict)
    path = manifest.write(document, output_dir)
    statement.write(document, output_dir)
    return Gate(output_dir, path, model, metrics)


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path
    public_key: ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


def write_keys(folder: Path, kind: str = "p256") -> KeyPair:
    """A new key pair as unencrypted PEM files: `p256` (ECDSA) or `ed25519`."""
    key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey = (
        ec.generate_private_key(ec.SECP256R1()) if kind == "p256"
        else ed25519.Ed25519PrivateKey.generate())
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / f"{kind}.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public = folder / f"{kind}.pub.pem"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return KeyPair(private, public, key.public_key())


def write_rsa_key(path: Path) -> Path:
    """An RSA private key: a kind `attest` does not sign with."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path
