"""The manifest's fingerprint, checklist, config_hash and environment_diff sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.config import Config
from repro_gate.errors import ErrorKind
from repro_gate.fingerprint.assemble import build_fingerprint
from repro_gate.fingerprint.checklist import evaluate
from repro_gate.fingerprint.environment_diff import environment_diff
from repro_gate.fingerprint.identity import config_hash
from repro_gate.manifest import read_document


def manifest_sections(
    config: Config,
    host: dict[str, Any],
    in_process: dict[str, dict[str, Any] | None],
    image: dict[str, Any] | None,
    baseline: Path | None,
) -> dict[str, Any]:
    """`fingerprint`, `checklist`, `config_hash`, and `environment_diff` when a baseline is given.

    A baseline that is missing, unreadable or not a manifest raises GateError(kind="baseline");
    one written by a newer repro-gate, GateError(kind="manifest_version").
    """
    fingerprint = build_fingerprint(config, host, in_process, image)
    sections: dict[str, Any] = {
        "fingerprint": fingerprint,
        "checklist": evaluate(fingerprint, config, in_process),
        "config_hash": config_hash(fingerprint),
    }
    if baseline is not None:
        old = read_document(Path(baseline), kind=ErrorKind.BASELINE)
        sections["environment_diff"] = environment_diff(old, {"fingerprint": fingerprint})
    return sections
