"""`repro-gate verify`: check a signed attestation with a public key, and files against its
subjects by their sha256 (docs/attestation.md). No torch, no GPU, no repro-gate manifest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from repro_gate.attestation import extra
from repro_gate.compare.files import sha256_file
from repro_gate.errors import EXIT_FAIL, EXIT_PASS, AttestationError, one_line


def add_parser(subparsers: Any, name: str) -> None:
    """Register `verify`."""
    parser = subparsers.add_parser(
        name,
        help="verify a signed attestation and that files are its subjects",
        description="Check the DSSE envelope's signature with the public key, that it holds a"
        " repro-gate reproducibility statement of a passing gate, and that each FILE's sha256"
        " is the digest of one of its subjects (whatever the file is called). Needs"
        f" `{extra.INSTALL}`. Exit 0: every check passed, one line per file; 1: a check"
        " failed (bad signature, edited payload, a digest not attested, a failed gate's"
        " statement), each named; 2: unreadable input.",
    )
    parser.add_argument("--attestation", required=True, type=Path, metavar="PATH",
                        help="the DSSE envelope (repro-gate attest's output)")
    parser.add_argument("--key", required=True, type=Path, metavar="PUB.pem",
                        help="the public key: ECDSA P-256 or Ed25519, PEM")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="a file that must be a subject (a checkpoint, a metrics file)")


def run(args: argparse.Namespace) -> int:
    """`repro-gate verify`: its flags as `verify`'s parameters."""
    return verify(args.attestation, args.key, args.files)


def verify(attestation: Path, key_path: Path, files: list[Path]) -> int:
    """0 when every check passes, 1 naming each that failed; AttestationError (2) on bad input."""
    extra.require("repro-gate verify")
    from repro_gate.attestation import envelope, signing, verification

    signed = envelope.read(attestation)
    key = signing.load_public(key_path)
    digests = {path: _digest(path) for path in files}
    result = verification.verify(signed, key, digests, str(attestation))
    for attested in result.attested:
        print(f"{attested.path}: attested as {attested.subject} (sha256 {attested.sha256})")
    for problem in result.problems:
        print(f"repro-gate: verify: {problem}", file=sys.stderr)
    return EXIT_PASS if result.passed else EXIT_FAIL


def _digest(path: Path) -> str:
    try:
        return sha256_file(path)
    except FileNotFoundError:
        raise AttestationError(f"{path}: file not found") from None
    except OSError as error:
        raise AttestationError(f"{path}: cannot read: {one_line(error)}") from None
