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


def lose_object(repo: Path, rel_path: str) -> str:
    """Delete the object of `rel_path`'s committed content, as a broken clone lacks it; its id."""
    blob = git(repo, "rev-parse", f"HEAD:{rel_path}")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    return blob
