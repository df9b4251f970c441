"""`run_audit(target, canary_root)`: plant the canaries (canaries.py), run every attempt of
table.ATTEMPTS through the slot's endpoint, remove whatever was created, and return an
`AuditReport`: one row per attempt, saying whether the filter refused it, the engine stopped
it, it had no effect, or it escaped; `render()` is the table the command prints.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.runner.audit.canaries import Loopback, planted
from repro_gate.runner.audit.engine import Blocked, Engine, Finding, Outcome
from repro_gate.runner.audit.steps import Attempt, AuditTarget, Context
from repro_gate.runner.audit.table import ATTEMPTS

NAME_PREFIX = "repro-gate-audit-"
COLUMNS = ("class", "attempt", "outcome", "detail")


@dataclass(frozen=True)
class AuditRow:
    """One attempt and how it ended."""

    klass: str
    attempt: str
    outcome: Outcome
    detail: str


@dataclass(frozen=True)
class AuditReport:
    """Every attempt's row, in the order they ran."""

    rows: tuple[AuditRow, ...]

    @property
    def escaped(self) -> bool:
        return any(row.outcome is Outcome.ESCAPED for row in self.rows)

    def render(self) -> str:
        """A plain text table, one row per attempt, then a one-line verdict."""
        cells = [COLUMNS, *((r.klass, r.attempt, r.outcome.value, r.detail) for r in self.rows)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS) - 1)]
        lines = [_line(row, widths) for row in cells]
        escaped = sum(row.outcome is Outcome.ESCAPED for row in self.rows)
        verdict = f"{escaped} attempt(s) ESCAPED" if escaped else "nothing escaped"
        return "\n".join([*lines, "", f"{len(self.rows)} attempts: {verdict}"]) + "\n"


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    """The cells padded to their column's width; the last one (the detail) as it is."""
    padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=True)]
    return "  ".join([*padded, cells[-1]])


def run_audit(target: AuditTarget, canary_root: Path) -> AuditReport:
    """Every attempt against `target.endpoint`, with canaries under `canary_root` (host) and in
    the other slot; everything planted or created is removed, whatever happens. GateError
    (one line) when the endpoint does not answer, the other slot's canary cannot start, or an
    attempt got an answer it cannot read."""
    prefix = f"{NAME_PREFIX}{secrets.token_hex(4)}-"
    engine = Engine(target.endpoint)
    if not engine.request("GET", "/_ping").ok:
        raise GateError(f"runner audit: the slot endpoint {target.endpoint} does not answer "
                        "a ping", kind=ErrorKind.DOCKER)
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=target.work_folder))
    scratch.chmod(0o755)
    try:
        with planted(canary_root, prefix, target.image, target.other_endpoint,
                     target.other_work_folder, target.other_gpu_uuid) as canaries, \
                Loopback() as loopback:
            context = Context(engine, target, canaries, loopback, scratch, prefix)
            return AuditReport(tuple(_row(attempt, context) for attempt in ATTEMPTS))
    finally:
        engine.remove_all()
        shutil.rmtree(scratch, ignore_errors=True)


def _row(attempt: Attempt, context: Context) -> AuditRow:
    """Run one attempt; what it created goes at once, so that attempts do not meet."""
    try:
        finding = _finding(attempt, context)
    finally:
        context.engine.remove_all()
    return AuditRow(attempt.klass, attempt.name, finding.outcome, finding.detail)


def _finding(attempt: Attempt, context: Context) -> Finding:
    other = context.canaries.other
    if attempt.needs_other_slot and (other.container is None or other.file is None):
        return Finding(Outcome.NOT_RUN, "no other slot to reach")
    try:
        return attempt.run(context)
    except Blocked as blocked:
        return blocked.finding
    except (OSError, ValueError, KeyError, TypeError) as error:  # an answer it cannot read
        raise GateError(f"runner audit: {attempt.klass} / {attempt.name}: could not tell what "
                        f"happened: {one_line(error)}", kind=ErrorKind.DOCKER) from None
