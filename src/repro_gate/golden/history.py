"""What git says about the golden file: the files changed since its commit, and the base
branch's version of it (a pull request that re-blessed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from repro_gate.fingerprint.git_command import run_git

GIT_TIMEOUT = 30  # seconds per git command
ENV_BASE_REF = "GITHUB_BASE_REF"  # the base branch of a pull request in GitHub Actions


def git(workdir: Path, *args: str) -> str | None:
    """`git ARGS` in `workdir`: its output, or None when git failed or is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=workdir, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def repo_root(workdir: Path) -> Path | None:
    top = git(workdir, "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top else None


def changed_since(workdir: Path, commit: str) -> list[str] | None:
    """Files (relative to the repository's root) that differ between `commit` and the working
    tree, untracked ones included; None when `commit` is not in this clone. GitFailedError
    when git fails once the commit is found: a broken clone, not an answer."""
    if git(workdir, "cat-file", "-e", f"{commit}^{{commit}}") is None:
        return None
    changed = run_git(workdir, "diff", "--name-only", commit, "--", ":/", timeout=GIT_TIMEOUT)
    untracked = run_git(workdir, "ls-files", "--others", "--exclude-standard", "--full-name",
                        ":/", timeout=GIT_TIMEOUT)
    return sorted({*changed.decode(errors="replace").split(),
                   *untracked.decode(errors="replace").split()})


def base_version(workdir: Path, rel_path: str) -> tuple[str, str] | None:
    """(ref, text) of the base branch's version of a repository file, None when there is no
    base branch (not a pull request) or it has no such file."""
    base = os.environ.get(ENV_BASE_REF, "").strip()
    if not base:
        return None
    for ref in (f"origin/{base}", base):
        text = git(workdir, "show", f"{ref}:{rel_path}")
        if text is not None:
            return ref, text
    return None
