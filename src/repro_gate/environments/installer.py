"""Running the package tools: uv (from the `uv` package, else PATH), pip as the fallback.

Every tool runs with the user's environment minus the gate's own credentials (an index token
in `UV_INDEX_*` is the user's and passes; `GITHUB_TOKEN` never does), and its output captured:
a failure becomes one line, the tool's last meaningful line, with the credentials of any
index URL in it masked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from repro_gate.credentials import mask_url_credentials, without_credentials
from repro_gate.errors import one_line

# uv's progress and summary lines: never the reason a command failed.
_CHATTER = ("Using ", "Resolved ", "Prepared ", "Installed ", "Uninstalled ", "Audited ",
            "Checked ", "Building ", "Built ", "Creating ", "Activate with", "Found ",
            "hint:", "help:", "warning:", "DEPRECATION:", "WARNING:", "[notice]",
            # the digests under a hash mismatch: the line above them says what failed
            "Expected:", "Computed:", "sha256:", "sha384:", "sha512:", "md5:")
# Prefixes uv and pip put before the line that says what went wrong.
_PREFIXES = ("\N{MULTIPLICATION SIGN}", "╰─▶", "├─▶", "error:", "ERROR:", "cause:", "Caused by:")


def uv_binary() -> Path | None:
    """The uv executable: the one the `uv` package ships, else the first on PATH."""
    try:
        import uv  # the PyPI package: a thin wrapper around the binary it ships

        return Path(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        return Path(found) if found else None


def run_tool(argv: Sequence[str | os.PathLike[str]], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a package tool to completion, output captured (a signal kills it on the way out)."""
    environ = without_credentials(os.environ)
    # Plain, stable output to read the error from; no pager or prompt can block a CI job.
    environ.update(NO_COLOR="1", UV_NO_PROGRESS="1", PIP_NO_INPUT="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run([str(arg) for arg in argv], cwd=cwd, env=environ, text=True,
                          capture_output=True, check=False)


def failure_line(completed: subprocess.CompletedProcess[str]) -> str:
    """What went wrong, as one line: the last line of the output that is not progress."""
    lines = [line.strip() for line in (completed.stderr + "\n" + completed.stdout).splitlines()]
    meaningful = [line for line in lines if line and not line.startswith(_CHATTER)]
    if not meaningful:
        return f"exit code {completed.returncode}"
    line = meaningful[-1]
    stripped = True
    while stripped:
        stripped = False
        for prefix in _PREFIXES:
            if line.startswith(prefix):
                line, stripped = line[len(prefix):].strip(), True
    return mask_url_credentials(one_line(line or meaningful[-1]))
