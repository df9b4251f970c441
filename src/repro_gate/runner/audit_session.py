"""`repro-gate runner audit`: bring up the audited slot and a second one, then run the attempts.

The audited slot's endpoint is brought up exactly as `serve` brings it up (SlotEndpoint); a
second slot's endpoint holds the other slot's canaries. The attempts need an image with a
POSIX shell in both engines: the runner image, pulled by the engines if it is not there. The
host canaries live in a folder only root may enter, removed afterwards. Last, the leftover
check: what a job made on the engine itself, unlabelled, is gone after the slot's reset.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError
from repro_gate.runner.audit import AuditReport, AuditRow, AuditTarget, Outcome, run_audit
from repro_gate.runner.audit.leftovers import leftovers
from repro_gate.runner.audit.run import NAME_PREFIX
from repro_gate.runner.containers import DockerFailure, connect
from repro_gate.runner.runner_config import RunnerConfig
from repro_gate.runner.slot_endpoint import SlotEndpoint
from repro_gate.runner.slots import Slot

# A GPU no slot has, for the attempts that ask for another GPU on a one-slot host.
ABSENT_GPU = "GPU-00000000-0000-0000-0000-000000000000"


def audit_slot(config: RunnerConfig, slots: list[Slot], slot: Slot,
               say: Callable[[str], None]) -> AuditReport:
    other = next((candidate for candidate in slots if candidate.index != slot.index), None)
    with ExitStack() as stack:
        endpoint = stack.enter_context(SlotEndpoint(config, slot, say))
        other_endpoint = None
        if other is not None:
            other_endpoint = stack.enter_context(SlotEndpoint(config, other, say))
        for each in filter(None, (endpoint, other_endpoint)):
            _ensure_image(config, each.engine_url)
        canary_root = Path(tempfile.mkdtemp(prefix="repro-gate-audit-"))  # 0700, root's
        stack.callback(shutil.rmtree, canary_root, ignore_errors=True)
        target = AuditTarget(
            endpoint=endpoint.socket, work_folder=endpoint.folders.work, gpu_uuid=slot.uuid,
            other_gpu_uuid=other.uuid if other is not None else ABSENT_GPU,
            other_endpoint=other_endpoint.socket if other_endpoint is not None else None,
            other_work_folder=other_endpoint.folders.work if other_endpoint is not None else None,
            image=config.runner.image)
        say(f"auditing slot {slot.index} through {endpoint.socket}")
        report = run_audit(target, canary_root)
        return AuditReport((*report.rows, _leftover_row(endpoint, config)))


def _leftover_row(endpoint: SlotEndpoint, config: RunnerConfig) -> AuditRow:
    """The leftover check, on a slot's own engine (the shared one is not reset)."""
    attempt = "unlabelled restart-always container, volume, network; reset"
    if endpoint.engine is None:
        return AuditRow("reset", attempt, Outcome.NOT_RUN, "the shared engine is not reset")
    finding = leftovers(endpoint.folders.engine_socket, config.runner.image,
                        f"{NAME_PREFIX}{secrets.token_hex(4)}-", endpoint.reset)
    return AuditRow("reset", attempt, finding.outcome, finding.detail)


def _ensure_image(config: RunnerConfig, url: str) -> None:
    daemon = connect(url)
    try:
        daemon.ensure_image(config.runner.image)
    except DockerFailure as error:
        raise GateError(f"runner audit: {error}", kind=ErrorKind.DOCKER) from None
    finally:
        daemon.close()
