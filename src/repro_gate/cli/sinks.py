"""Where the runs' output goes while the gate runs: stderr, or one Actions log group per run.

Each run's sink also shows the gate's status lines for it (launch/progress.py): on a terminal
one line rewritten in place, in a log (CI) a plain line every so often. `--quiet` silences the
training's output, never the status: the user is not left without a line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TextIO

from repro_gate.errors import printable
from repro_gate.launch import progress
from repro_gate.launch.base import LineSink
from repro_gate.publish import actions

SinkFactory = Callable[[str], LineSink]
CLEAR_LINE = "\r\x1b[K"  # back to the start of the line, erase it


class RunSink:
    """One run's output, each line prefixed with its name, and its status lines."""

    def __init__(self, name: str, stream: Callable[[], TextIO], quiet: bool = False) -> None:
        self.name = name
        self._stream = stream  # looked up when written: the stream may be replaced meanwhile
        self.quiet = quiet
        self._lock = threading.Lock()  # output and status come from different threads
        self._status_shown = False  # a status is on the terminal's current line

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self._clear_status()
            print(f"[{self.name}] {line}", file=self._stream(), flush=True)

    def status(self, text: str) -> None:
        """Show the run's status: rewritten in place on a terminal, a new line in a log."""
        line = f"[{self.name}] repro-gate: {text}"
        with self._lock:
            stream = self._stream()
            if self._live():
                stream.write(CLEAR_LINE + line)
                stream.flush()
                self._status_shown = True
            else:
                print(line, file=stream, flush=True)

    def end_status(self) -> None:
        """The run is over: a status left on the terminal's line is erased."""
        with self._lock:
            self._clear_status()

    def status_timing(self) -> tuple[float, float]:
        """Seconds before the first status and between two (launch/progress.py)."""
        return progress.timing(self._live())

    def _live(self) -> bool:
        try:
            return self._stream().isatty()
        except (AttributeError, ValueError):
            return False

    def _clear_status(self) -> None:
        if self._status_shown:
            stream = self._stream()
            stream.write(CLEAR_LINE)
            stream.flush()
            self._status_shown = False


def stderr_sink_for(quiet: bool) -> SinkFactory:
    """Run output streamed to stderr, each line prefixed with its run's name (none when quiet);
    status lines either way."""
    return lambda name: RunSink(name, lambda: sys.stderr, quiet)


class GroupedSinks:
    """A sink factory for the action: each run's output folded into its own log group.

    It is used inside `actions.commands_stopped()` (cli/session.py opens it), so the training
    cannot set outputs, masks or annotations by printing `::...::` lines; the groups are the
    gate's own commands, written between two windows.
    """

    def __init__(self) -> None:
        self._grouped = False  # a run's group is open

    def __call__(self, name: str) -> LineSink:
        ending = ["::endgroup::"] if self._grouped else []
        actions.emit_all([*ending, actions.command("group", f"repro-gate run {name}")])
        self._grouped = True
        return RunSink(name, lambda: sys.stdout)

    def close(self) -> None:
        """End the current run's group, if one is open."""
        if self._grouped:
            actions.emit("::endgroup::")
            self._grouped = False


def notices_on_stderr(line: str) -> None:
    """The gate's notices (`repro-gate: warning: ...`) on stderr, each flushed at once; a path
    or name in one has its control characters escaped."""
    print(printable(line), file=sys.stderr, flush=True)


def notices_on_stdout(line: str) -> None:
    """The action's notices: on stdout, in order with the lines that switch workflow commands
    off and on (stderr is another pipe: nothing orders its lines with stdout's)."""
    print(printable(line), file=sys.stdout, flush=True)
