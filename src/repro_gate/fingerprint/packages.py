"""Installed distributions compared with the versions the lockfiles pin."""

from __future__ import annotations

from typing import Any


def lock_mismatches(installed: dict[str, str], lockfiles: list[dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    """Installed packages whose version is none of those a lockfile pins for that name."""
    mismatches = []
    for lockfile in lockfiles:
        if not lockfile.get("is_lock"):
            continue
        for name, versions in lockfile.get("pins", {}).items():
            have = installed.get(name)
            if have is not None and not any(same_version(have, v) for v in versions):
                mismatches.append(
                    {"name": name, "installed": have, "locked": versions,
                     "lockfile": lockfile["path"]}
                )
    return mismatches


def same_version(installed: str, locked: str) -> bool:
    """Equal versions, ignoring case, a leading `v` and a local tag the lock leaves out."""
    a = installed.strip().lower().removeprefix("v")
    b = locked.strip().lower().removeprefix("v")
    return a == b or ("+" not in b and a.split("+", 1)[0] == b)
