"""The signed reproducibility attestation (docs/attestation.md): an in-toto Statement whose
subjects are run A's artifacts and whose predicate is what the gate compared and saw.

    predicate.py          the predicate, from a manifest; its type URI, defined once
    statement.py          the Statement, from a manifest; written beside it, read back, checked
    subject_files.py      where run A's files of the subjects lie, for `actions/attest`
    extra.py              whether the signing library (`repro-gate[attest]`) is installed
    signing.py            keys (ECDSA P-256, Ed25519), their key IDs, signing and checking bytes
    envelope.py           the DSSE envelope: PAE, signing, reading, checking its signatures
    verification.py       `repro-gate verify`: signature, predicate type, verdict, file digests

Only `signing.py` imports the signing library (and the modules that import it): the gate
writes the Statement with the standard library alone, so the action's image carries no
cryptography.
"""
