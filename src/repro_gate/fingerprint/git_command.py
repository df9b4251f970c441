"""Running git for the gate: its output, or `GitFailedError` with the command and the last line
git wrote on stderr (git ends with its verdict, `fatal: unable to read 3f2a…`; earlier lines
are warnings and hints)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repro_gate.errors import GitFailedError

GIT_TIMEOUT_SECONDS = 20


def run_git(folder: Path, *args: str, timeout: float = GIT_TIMEOUT_SECONDS) -> bytes:
    """The output of `git -C FOLDER ARGS`. GitFailedError when git exits non-zero or gives no
    answer within `timeout` seconds; FileNotFoundError when git is not installed."""
    command = ["git", "-C", str(folder), *args]
    try:
        completed = subprocess.run(command, capture_output=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GitFailedError(command, f"gave no answer within {timeout:g} s") from None
    if completed.returncode != 0:
        stderr = completed.stderr.decode("utf-8", errors="replace")
        said = last_line(stderr)
        problem = f"failed with exit code {completed.returncode}"
        raise GitFailedError(command, f"{problem}: {said}" if said else problem, stderr)
    return completed.stdout


def last_line(text: str) -> str:
    """The last non-blank line of `text`, stripped; "" when there is none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
