"""Where two compared runs came from: their commit and command, said before any cause.

`repro-gate compare` takes runs made elsewhere. Runs of different code or different commands
differ for that reason first, and a cause found in their records (an unseeded generator, an
op) would mislead: the report names the mismatch before anything else. Only manifests carry
the commit and the command; a bare run directory has neither, and nothing is claimed for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Provenance:
    """The code and command a run was made from (None: not recorded)."""

    commit: str | None
    dirty: bool | None
    command: str | None


def of_manifest(document: dict[str, Any]) -> Provenance:
    """The provenance a manifest records (`fingerprint.code`, `config.command`)."""
    code = (document.get("fingerprint") or {}).get("code") or {}
    command = (document.get("config") or {}).get("command")
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    return Provenance(code.get("commit"), code.get("dirty"),
                      command if isinstance(command, str) else None)


def mismatches(a: Provenance | None, b: Provenance | None) -> list[str]:
    """One sentence per way the two runs were not made from the same code and command."""
    if a is None or b is None:
        return []
    found = []
    if a.commit and b.commit and a.commit != b.commit:
        found.append(f"runs A and B are of different commits ({a.commit[:12]} and"
                     f" {b.commit[:12]}): code changes explain differences before any cause")
    elif a.commit and a.commit == b.commit and (a.dirty or b.dirty):
        dirty = " and ".join(name for name, side in (("A", a), ("B", b)) if side.dirty)
        found.append(f"run {dirty} had uncommitted changes: the code may differ")
    if a.command and b.command and a.command != b.command:
        found.append(f"runs A and B ran different commands ({a.command!r} and {b.command!r})")
    return found
