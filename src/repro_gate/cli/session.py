"""One gate command's lifecycle, written once: config → fork safety → error record → masking →
signals and lock → run → render.

`check`, `upgrade` and the action's two modes differ only in what they load, how a warning
shows, what records an error when nothing ran, where the runs' output goes, and how the
outcome is rendered; the order of the steps and what each guards is here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from repro_gate import notices
from repro_gate.cli.sinks import GroupedSinks, SinkFactory, notices_on_stderr
from repro_gate.config import Config
from repro_gate.errors import GateError
from repro_gate.gate import file_lock
from repro_gate.launch import cancel
from repro_gate.publish import actions
from repro_gate.publish.github.fork_safety import check_fork_safety


@dataclass(frozen=True)
class Output:
    """How a gate command shows itself: the record as JSON or the report, the runs' output
    streamed or not, another gate's lock waited for or refused."""

    as_json: bool = False
    quiet: bool = False
    wait: bool = False


PLAIN = Output()  # the report, the runs' output streamed, a held lock refused
ErrorRecord = Callable[[GateError], None]  # nothing ran: the error is still recorded


class Outcome(Protocol):
    """What a gate command's run ends with: the process exit code, among the rest."""

    @property
    def exit_code(self) -> int: ...


OutcomeT = TypeVar("OutcomeT", bound=Outcome)


@dataclass
class Session:
    """One run of a gate command, from its config to its rendered outcome."""

    warn: Callable[[str], None]  # the fork-safety warning: a stderr line, or an annotation
    record_error: ErrorRecord
    sinks: SinkFactory  # where each run's output goes
    wait: bool = False  # wait for another gate's lock instead of refusing
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    notices: notices.NoticeSink = notices_on_stderr
    _masked: bool = False

    def mask(self) -> None:
        """Register the credentials with the Actions log, once (the action does it first)."""
        if not self._masked:
            actions.mask_credentials(self.environ)
            self._masked = True

    @contextmanager
    def recording(self, record: ErrorRecord | None = None) -> Iterator[None]:
        """A GateError raised inside is recorded (`record`, else the session's), then raised on
        to cli/main.py, which prints it as one line."""
        try:
            yield
        except GateError as error:
            (record or self.record_error)(error)
            raise

    def configure(self, load: Callable[[], Config]) -> Config:
        """The config `load` gives, checked for code that is not the base repository's on a
        self-hosted runner, or a fork's checked out by pull_request_target (refused, or a
        warning where allowed); an error is recorded."""
        with self.recording():
            effective = load()
            if warning := check_fork_safety(self.environ, effective.workdir,
                                            effective.allow_fork_pull_requests,
                                            effective.report.timeout):
                self.warn(warning)
        return effective

    def run(
        self,
        effective: Config,
        gate: Callable[[SinkFactory], OutcomeT],
        render: Callable[[OutcomeT], str],
    ) -> int:
        """Mask, hold the lock with signals cancelling, run `gate`, print its rendering; the
        outcome's exit code."""
        self.mask()
        with self._commands_stopped():
            try:
                with (notices.sent_to(self.notices), cancel.on_signals(),
                      file_lock.hold(effective, self.wait)):
                    outcome = gate(self.sinks)
            finally:
                if isinstance(self.sinks, GroupedSinks):
                    self.sinks.close()
            print(render(outcome))
        return outcome.exit_code

    def _commands_stopped(self) -> AbstractContextManager[None]:
        """In the action, workflow commands are off while the runs' output, the notices and
        the report print: each may hold a name the training chose. The gate's own commands
        (groups, annotations) are written between two windows (publish/actions.py)."""
        if isinstance(self.sinks, GroupedSinks):
            return actions.commands_stopped()
        return nullcontext()


def warn_on_stderr(warning: str) -> None:
    """A warning before any run: one line on stderr."""
    print(f"repro-gate: warning: {warning}", file=sys.stderr)


def shown_path(path: Path | None) -> str | None:
    """A written record's path as the report shows it: relative to here when it is below."""
    if path is None:
        return None
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
