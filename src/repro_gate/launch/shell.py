"""Command strings: run by `/bin/sh -c`, as a workflow `run:` step would, in both launchers.

A run's argv is a command string when it is `[/bin/sh, -c, TEXT]`. When the shell cannot find
(exit code 127) or execute (126) a program, the run ends with that code and the shell's message
as the last line of its log; `shell_failure` turns that into the one-line error of a missing
command, as for an argv whose program is missing. The text runs with the gate's folders put in
front of its own `PYTHONPATH` assignments (`shell_assignments.py`), so the probe still loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.launch.shell_assignments import as_written, keep_gate_path

SHELL = "/bin/sh"
# POSIX shells exit with these when the program of a command is missing or not executable.
NOT_FOUND = 127
NOT_EXECUTABLE = 126
# Enough of the log's end for its last line (the shell's message is short).
TAIL_BYTES = 4096


def shell_argv(text: str) -> list[str]:
    """The argv that runs the command string `text`, its PYTHONPATH assignments keeping the
    gate's folders in front."""
    return [SHELL, "-c", keep_gate_path(text)]


def shell_text(argv: Sequence[str]) -> str | None:
    """The command string when `argv` runs one through the shell, else None."""
    if len(argv) == 3 and argv[0] == SHELL and argv[1] == "-c":
        return argv[2]
    return None


def shell_failure(
    argv: Sequence[str], exit_code: int | None, log_path: Path, where: str
) -> GateError | None:
    """The `command_not_found` error of a command string whose shell could not find or execute
    a program (`where`: the run and its directory), else None."""
    text = shell_text(argv)
    if text is None or exit_code not in (NOT_FOUND, NOT_EXECUTABLE):
        return None
    problem = "command not found" if exit_code == NOT_FOUND else "command is not executable"
    said = last_line(log_path)
    reason = f"the shell said: {said}" if said else f"{SHELL} exited with code {exit_code}"
    command = one_line(" ".join(as_written(text).split()))  # a multi-line string, on one line
    return GateError(f"{problem}: {command} ({reason}; {where})",
                     kind=ErrorKind.COMMAND_NOT_FOUND)


def last_line(log_path: Path) -> str:
    """The last non-empty line of a run's log, on one line ('' when there is none)."""
    try:
        with log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, 2) - TAIL_BYTES))
            tail = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line for line in tail.splitlines() if line.strip()]
    return one_line(lines[-1].strip()) if lines else ""
