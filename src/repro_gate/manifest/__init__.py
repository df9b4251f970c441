"""The run manifest (`manifest.json`, `schemas/manifest.schema.json`): its one home.

Every manifest this gate writes starts with `header(...)` and goes through `write` or `update`
(validated, atomic); every manifest it reads goes through `read` (or `read_document` for the
baseline and `diff`), which migrates earlier schema versions and refuses newer ones.
"""

from __future__ import annotations

from repro_gate.manifest.documents import read_document
from repro_gate.manifest.header import Header, header
from repro_gate.manifest.store import MANIFEST_NAME, read, update, write, write_json_atomic
from repro_gate.manifest.versions import SCHEMA_MINOR, SCHEMA_VERSION

__all__ = [
    "MANIFEST_NAME",
    "SCHEMA_MINOR",
    "SCHEMA_VERSION",
    "Header",
    "header",
    "read",
    "read_document",
    "update",
    "write",
    "write_json_atomic",
]
