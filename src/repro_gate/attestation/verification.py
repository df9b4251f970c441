"""`repro-gate verify`: an envelope checked with a public key, then files by their digests.

What passes: a signature made with the key over the envelope as it is (an edited payload
breaks it), an in-toto Statement of our predicate type, a `pass` verdict, and for each file
a subject with its sha256, whatever the subject is named (as `gh attestation verify` matches
by digest). Every failure is named; none is an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro_gate.attestation import signing
from repro_gate.attestation.envelope import PAYLOAD_TYPE, Envelope, payload_json
from repro_gate.attestation.predicate import PREDICATE_TYPE
from repro_gate.attestation.statement import STATEMENT_TYPE


@dataclass(frozen=True)
class Attested:
    """A file whose digest is a subject's."""

    path: Path
    sha256: str
    subject: str  # the subject's name: the artifact's path relative to the gate's workdir


@dataclass
class Verification:
    attested: list[Attested] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each

    @property
    def passed(self) -> bool:
        return not self.problems


def verify(envelope: Envelope, key: signing.PublicKey, digests: Mapping[Path, str],
           source: str) -> Verification:
    """Check `envelope` with `key`, then each file of `digests` (path -> sha256)."""
    result = Verification()
    if envelope.payload_type != PAYLOAD_TYPE:
        result.problems.append(f"{source}: payload type {envelope.payload_type!r}, not"
                               f" {PAYLOAD_TYPE}")
        return result
    if not envelope.signed_by(key):
        result.problems.append(
            f"{source}: bad signature: no signature verifies with key"
            f" {signing.key_id(key)[:16]} (another key, or the payload was edited)")
        return result
    statement = payload_json(envelope, source)
    result.problems += statement_problems(statement, source)
    if result.problems:
        return result
    by_digest = subjects_by_digest(statement)
    for path, sha256 in digests.items():
        subject = by_digest.get(sha256)
        if subject is None:
            result.problems.append(f"{path}: sha256 {sha256} is not attested by {source}")
        else:
            result.attested.append(Attested(path, sha256, subject))
    return result


def statement_problems(statement: Mapping[str, Any], source: str) -> list[str]:
    """Why a signed Statement does not attest a reproducible gate (none when it does)."""
    if statement.get("_type") != STATEMENT_TYPE:
        return [f"{source}: not an in-toto Statement v1 (_type {statement.get('_type')!r})"]
    if statement.get("predicateType") != PREDICATE_TYPE:
        return [f"{source}: predicate type {statement.get('predicateType')!r}, not"
                f" {PREDICATE_TYPE}"]
    predicate = statement.get("predicate")
    verdict = predicate.get("verdict") if isinstance(predicate, dict) else None
    if verdict != "pass":
        return [f"{source}: the statement of a gate whose verdict is {verdict}, not pass"]
    return []


def subjects_by_digest(statement: Mapping[str, Any]) -> dict[str, str]:
    """sha256 -> the name of the first subject with that digest."""
    found: dict[str, str] = {}
    for subject in statement.get("subject") or []:
        if not isinstance(subject, dict):
            continue
        digest = (subject.get("digest") or {}).get("sha256")
        if isinstance(digest, str):
            found.setdefault(digest.lower(), str(subject.get("name", "")))
    return found
