"""Git as the tests run it: a fixed identity, no signing, `main` as the first branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com",
       "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in `repo`; its output without the closing newline. A failure fails the test."""
    completed = subprocess.run([*GIT, *args], cwd=repo, capture_output=True, text=True,
                               check=False, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()
