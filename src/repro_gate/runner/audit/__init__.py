"""`repro-gate runner audit`: the project's own escape attempts against a live slot endpoint,
with canaries on the host and in another slot (docs/runner-threat-model.md, "What runner
audit tries"). `run_audit(AuditTarget(...), canary_root)` returns an `AuditReport`.

    run.py          `run_audit`, `AuditReport` (its rows, `escaped`, `render()`)
    steps.py        `AuditTarget`, the run's context, an attempt's row, the steps attempts share
    table.py        `ATTEMPTS`: every attempt, in order
    framing.py      requests hidden from the filter (bare LF, Expect: 100-continue)
    mounts.py       volume driver options, check-then-mount symlinks, binds of the host
    other_slots.py  the other slot's container, work folder, network and cgroup; leaks
    devices.py      privileged, other GPUs
    leftovers.py    what a job made past the filter, gone after the slot's reset
    canaries.py     the secrets planted and the loopback server that watches
    engine.py       raw HTTP on an endpoint, who answered (filter or engine), clean-up
"""

from repro_gate.runner.audit.engine import Outcome
from repro_gate.runner.audit.run import AuditReport, AuditRow, run_audit
from repro_gate.runner.audit.steps import AuditTarget

__all__ = ["AuditReport", "AuditRow", "AuditTarget", "Outcome", "run_audit"]
