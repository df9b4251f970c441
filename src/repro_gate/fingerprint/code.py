"""Code facts from git: commit, ref, dirty flag, hash of the uncommitted diff, remote URL.

No repository, or one without commits, is a state of the code (`reason` says which); a git
command that fails in a repository that has a commit (a clone missing an object) is the error
`git_failed`, with the command and git's message.

The gate's own files (its lock directory and its output directory, `gate_files`) are left out
of the dirty flag, the diff and the untracked files: a gate run on a clean checkout records
`dirty: false`, however often it ran there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repro_gate.credentials import strip_url_credentials
from repro_gate.errors import GitFailedError
from repro_gate.fingerprint.git_command import run_git


def collect_code(workdir: Path, gate_files: Sequence[Path] = ()) -> dict[str, Any]:
    """Git facts of the repository holding `workdir`, `gate_files` left out; `reason` says why
    they are absent. GitFailedError when git fails on a repository that has a commit."""
    empty: dict[str, Any] = {
        "commit": None,
        "ref": None,
        "dirty": None,
        "diff_sha256": None,
        "untracked_files": None,
        "remote_url": None,
    }
    try:
        commit = _git(workdir, "rev-parse", "HEAD").strip()
    except FileNotFoundError:
        return {**empty, "reason": "git is not installed"}
    except GitFailedError as error:
        # git names the cause on its first line; later lines are usage hints.
        stderr = error.stderr.strip()
        if "not a git repository" in stderr:
            return {**empty, "reason": "not a git repository"}
        if "unknown revision" in stderr or "ambiguous argument 'HEAD'" in stderr:
            return {**empty, "reason": "git repository has no commits"}
        return {**empty, "reason": stderr.splitlines()[0] if stderr else error.message}
    ref = _git_or_none(workdir, "symbolic-ref", "--quiet", "HEAD") or "HEAD (detached)"
    excluded = _excluded(workdir, gate_files)
    diff = run_git(workdir, "diff", "HEAD", "--no-ext-diff", "--binary", "--", *excluded)
    untracked = [
        line
        for line in _git(
            workdir, "ls-files", "--others", "--exclude-standard", "--", *excluded
        ).splitlines()
        if line
    ]
    return {
        "commit": commit,
        "ref": ref.strip(),
        "dirty": bool(diff) or bool(untracked),
        "diff_sha256": hashlib.sha256(diff).hexdigest() if diff else None,
        "untracked_files": len(untracked),
        "remote_url": _remote_url(workdir),
    }


def _excluded(workdir: Path, paths: Sequence[Path]) -> list[str]:
    """Pathspecs that leave `paths` (and all below them) out, for those inside the repository."""
    top = repository_root(workdir)
    if top is None:
        return []
    excluded = []
    for path in paths:
        try:
            relative = Path(path).resolve().relative_to(top.resolve())
        except ValueError:
            continue
        if relative != Path("."):
            excluded.append(f":(exclude,top,literal){relative.as_posix()}")
    return excluded


def strip_credentials(url: str) -> str:
    """`url` without user info and credential-like query parameters (`credentials`)."""
    return strip_url_credentials(url)


def _remote_url(workdir: Path) -> str | None:
    url = _git_or_none(workdir, "remote", "get-url", "origin")
    if url is None:
        remotes = (_git_or_none(workdir, "remote") or "").split()
        url = _git_or_none(workdir, "remote", "get-url", remotes[0]) if remotes else None
    return strip_credentials(url.strip()) if url else None


def _git(workdir: Path, *args: str) -> str:
    return run_git(workdir, *args).decode("utf-8", errors="replace")


def _git_or_none(workdir: Path, *args: str) -> str | None:
    """The output, or None where a failure is an answer (no remote, a detached HEAD)."""
    try:
        return _git(workdir, *args)
    except (GitFailedError, FileNotFoundError):
        return None


def repository_root(workdir: Path) -> Path | None:
    """Top directory of the git work tree holding `workdir`, or None."""
    top = _git_or_none(workdir, "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top else None
