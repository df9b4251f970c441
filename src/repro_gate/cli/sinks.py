"""Where the runs' output goes while the gate runs: stderr, or one Actions log group per run."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable

from repro_gate.launch.base import LineSink
from repro_gate.publish import actions

SinkFactory = Callable[[str], LineSink]


def stderr_sink_for(quiet: bool) -> SinkFactory:
    """Run output streamed to stderr, each line prefixed with its run's name."""

    def factory(name: str) -> LineSink:
        def sink(line: str) -> None:
            if not quiet:
                print(f"[{name}] {line}", file=sys.stderr, flush=True)

        return sink

    return factory


class GroupedSinks:
    """A sink factory for the gate: each run's output folded into its own log group.

    Workflow commands are switched off while a run prints, so the training cannot set outputs,
    masks or annotations by printing `::...::` lines.
    """

    def __init__(self) -> None:
        self._resume_token: str | None = None

    def __call__(self, name: str) -> LineSink:
        self.close()
        actions.emit(actions.command("group", f"repro-gate run {name}"))
        self._resume_token = secrets.token_hex(16)
        actions.emit(actions.command("stop-commands", self._resume_token))

        def sink(line: str) -> None:
            print(f"[{name}] {line}", flush=True)

        return sink

    def close(self) -> None:
        """End the current run's group, if one is open."""
        if self._resume_token is not None:
            actions.emit(f"::{self._resume_token}::")
            actions.emit("::endgroup::")
            self._resume_token = None
