"""The in-toto Statement (v1) of a gate that reached a verdict: run A's compared artifacts as
its subjects, the reproducibility predicate as its predicate.

The gate writes it beside the manifest (`attestation.intoto.json`), with the predicate alone
(`predicate.json`, what `actions/attest` takes). Both are made from the manifest alone, so
`repro-gate attest` checks a Statement by making it again from its manifest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from repro_gate import notices, validation
from repro_gate.attestation import predicate as predicates
from repro_gate.errors import AttestationError, ErrorKind, GateError, one_line
from repro_gate.manifest.store import load_object, masked, write_json_atomic, write_text_atomic

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
STATEMENT_NAME = "attestation.intoto.json"
PREDICATE_NAME = "predicate.json"
ENVELOPE_NAME = "attestation.dsse.json"  # `repro-gate attest`'s signed envelope, by default
ATTESTED_VERDICTS = ("pass", "fail")  # a gate that ended in error compared nothing to attest


class Subject(TypedDict):
    name: str  # the artifact's path relative to the working directory
    digest: dict[str, str]  # {"sha256": hex}


# `_type` is no Python identifier: the functional form of TypedDict.
class Statement(TypedDict):
    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: predicates.Predicate


def subjects(manifest: Mapping[str, Any]) -> list[Subject]:
    """Run A's file of each compared artifact, named by its path, with its sha256."""
    compared = {str(entry["path"]) for entry in
                (manifest.get("comparison") or {}).get("artifacts") or []}
    run = predicates.first_run(manifest) or {}
    return [{"name": str(entry["path"]), "digest": {"sha256": str(entry["sha256"])}}
            for entry in run.get("artifacts") or [] if entry.get("path") in compared]


def build(manifest: Mapping[str, Any]) -> Statement | None:
    """The Statement of a manifest; None when the gate ended in error or compared no artifact
    (a Statement names at least one subject)."""
    if manifest.get("verdict") not in ATTESTED_VERDICTS:
        return None
    named = subjects(manifest)
    if not named:
        return None
    return {
        "_type": STATEMENT_TYPE,
        "subject": named,
        "predicateType": predicates.PREDICATE_TYPE,
        "predicate": predicates.build(manifest),
    }


def write(manifest: Mapping[str, Any], output_dir: Path) -> Path | None:
    """Write the Statement and the predicate beside the manifest; None when there is none.

    The manifest as written (credentials masked) is what they are made from, and what `attest`
    checks them against. The files of an earlier gate are removed when this one has none, so
    that they never pass for this gate's; so is an earlier gate's signed envelope, always.
    """
    statement = build(masked(dict(manifest)))
    path = output_dir / STATEMENT_NAME
    (output_dir / ENVELOPE_NAME).unlink(missing_ok=True)
    if statement is None:
        path.unlink(missing_ok=True)
        (output_dir / PREDICATE_NAME).unlink(missing_ok=True)
        return None
    check_predicate(statement["predicate"], str(path))
    write_json_atomic(output_dir / PREDICATE_NAME, statement["predicate"])
    write_text_atomic(path, payload(statement).decode("utf-8"))
    return path


def payload(statement: Statement) -> bytes:
    """The Statement as its file holds it, and as an envelope carries it."""
    return (json.dumps(statement, indent=2, allow_nan=False) + "\n").encode("utf-8")


def write_beside(manifest: Mapping[str, Any], output_dir: Path) -> Path | None:
    """`write`, for the gate: a Statement that cannot be written is a warning, never a change
    of the verdict (the manifest is written already)."""
    try:
        return write(manifest, output_dir)
    except (GateError, OSError) as error:
        notices.warning(f"no attestation statement written: {one_line(error)}")
        return None


def check_predicate(predicate: Mapping[str, Any], source: str) -> None:
    """Raise when the predicate breaks its schema (schemas/reproducibility-predicate)."""
    problems = validation.errors(predicates.SCHEMA_NAME, predicate)
    if problems:
        raise AttestationError(f"{source}: the predicate does not match its schema: {problems[0]}")


def read(path: Path) -> Mapping[str, Any]:
    """The Statement in the file at `path`, as JSON; an AttestationError for anything else."""
    try:
        return load_object(path, noun="statement", kind=ErrorKind.ATTESTATION)
    except GateError as error:
        raise AttestationError(error.message) from None


def check_against(statement: Mapping[str, Any], manifest: Mapping[str, Any], source: str
                  ) -> Statement:
    """The Statement its manifest makes, when `statement` is that one (no field edited in
    either); else an AttestationError."""
    expected = build(manifest)
    if expected is None:
        raise AttestationError(
            f"{source}: the manifest's gate has no statement (verdict"
            f" {manifest.get('verdict')}, {len(subjects(manifest))} artifacts compared)")
    wanted: Mapping[str, Any] = expected
    if dict(statement) != dict(wanted):
        differing = sorted(key for key in {*statement, *wanted}
                           if statement.get(key) != wanted.get(key))
        raise AttestationError(
            f"{source}: not the statement of its manifest ({', '.join(differing)} differ);"
            " run the gate again")
    return expected
