"""Environment fingerprint, config_hash identity, environment diff and reproducibility checklist.

Host-side facts come from `collect_host`; the in-process facts come from the probe's
`_repro_gate_fingerprint.collect()` in each run; `manifest_sections` merges them.
"""

from __future__ import annotations

from repro_gate.fingerprint.environment_diff import diff_lines, environment_diff
from repro_gate.fingerprint.host import collect_host
from repro_gate.fingerprint.identity import config_hash, identity
from repro_gate.fingerprint.sections import manifest_sections

__all__ = [
    "collect_host",
    "config_hash",
    "diff_lines",
    "environment_diff",
    "identity",
    "manifest_sections",
]
