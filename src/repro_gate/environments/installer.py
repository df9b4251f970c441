"""Running the package tools: uv (from the `uv` package, else PATH), pip as the fallback.

Every tool runs with the user's environment minus the gate's own credentials (an index token
in `UV_INDEX_*` is the user's and passes; `GITHUB_TOKEN` never does), and its output captured:
a failure becomes one line, the tool's last meaningful line, with the credentials of any
index URL in it masked; `explanation` keeps all of them (for the record), and
`index_unreachable` tells a package index that cannot be reached from a set of pins that
does not resolve.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from repro_gate.credentials import mask_url_credentials, without_credentials
from repro_gate.errors import ErrorKind, GateError, one_line

# uv's progress and summary lines: never the reason a command failed.
_CHATTER = ("Using ", "Resolved ", "Prepared ", "Installed ", "Uninstalled ", "Audited ",
            "Checked ", "Building ", "Built ", "Creating ", "Activate with", "Found ",
            "hint:", "help:", "warning:", "DEPRECATION:", "WARNING:", "[notice]",
            # the digests under a hash mismatch: the line above them says what failed
            "Expected:", "Computed:", "sha256:", "sha384:", "sha512:", "md5:")
# Prefixes uv and pip put before the line that says what went wrong.
_PREFIXES = ("\N{MULTIPLICATION SIGN}", "╰─▶", "├─▶", "error:", "ERROR:", "cause:", "Caused by:")
# What uv and pip say when an index cannot be reached at all: refused, no such host, no route.
_UNREACHABLE = ("connection refused", "dns error", "error resolving dns",
                "failed to lookup address", "name or service not known",
                "temporary failure in name resolution", "network is unreachable",
                "no route to host", "failed to establish a new connection", "tcp connect error")
MAX_EXPLANATION_LINES = 40  # of a tool's explanation kept in the record
WIDE_COLUMNS = "100000"  # no tool wraps a line of its explanation


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
    # uv wraps its explanations at COLUMNS, which would leave a fragment as the last line.
    environ.update(NO_COLOR="1", UV_NO_PROGRESS="1", PIP_NO_INPUT="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1", COLUMNS=WIDE_COLUMNS)
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


def explanation(completed: subprocess.CompletedProcess[str]) -> str:
    """The tool's own explanation of a failure: its lines without progress, at most
    MAX_EXPLANATION_LINES, credentials in URLs masked."""
    lines = [line.rstrip() for line in (completed.stderr + "\n" + completed.stdout).splitlines()]
    meaningful = [line for line in lines if line.strip()
                  and not line.strip().startswith(_CHATTER)]
    return "\n".join(mask_url_credentials(line) for line in meaningful[-MAX_EXPLANATION_LINES:])


def failure_kind(completed: subprocess.CompletedProcess[str], otherwise: ErrorKind) -> ErrorKind:
    """INDEX_UNREACHABLE when the tool could not reach a package index, else `otherwise`."""
    text = (completed.stderr + "\n" + completed.stdout).lower()
    return ErrorKind.INDEX_UNREACHABLE if any(s in text for s in _UNREACHABLE) else otherwise


def unreachable_line(completed: subprocess.CompletedProcess[str]) -> str:
    """`http://host/simple/numpy/: Connection refused (os error 111)`: what could not be
    reached, and why."""
    url = re.search(r"https?://\S+?(?=[)\s]|$)", completed.stderr + "\n" + completed.stdout)
    where = mask_url_credentials(url.group(0)) + ": " if url else ""
    return where + failure_line(completed)


def tool_error(completed: subprocess.CompletedProcess[str], what: str,
               otherwise: ErrorKind) -> GateError:
    """The GateError of a failed tool: `what: <its line>`, its explanation as the detail, and
    the kind INDEX_UNREACHABLE when no index could be reached, else `otherwise`."""
    kind = failure_kind(completed, otherwise)
    if kind is ErrorKind.INDEX_UNREACHABLE:
        return GateError(f"{what}: the package index cannot be reached:"
                         f" {unreachable_line(completed)}", kind=kind,
                         detail=explanation(completed))
    return GateError(f"{what}: {failure_line(completed)}", kind=kind,
                     detail=explanation(completed))
