"""Watching one runner container until its run ends: its state, the slot's hook status, a drain.

The slot's state follows what is seen: IDLE while the runner waits, BUSY once the job-started
hook has written its status. A drain stops an idle runner at once (its registration deleted
first, so GitHub gives it no job) and gives a busy one `drain_timeout`. A daemon that stops
answering is waited for, and the runner looked up again by its ID.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from repro_gate.errors import GitHubError, ReproGateError
from repro_gate.runner import hook
from repro_gate.runner.containers import ContainerState, Daemon, DaemonGone, DockerFailure
from repro_gate.runner.metrics import ServiceMetrics, SlotState
from repro_gate.runner.registration import JitRunner, Registrar
from repro_gate.runner.runner_config import RunnerConfig
from repro_gate.runner.slots import Slot

POLL_SECONDS = 0.5  # how often a running runner, its hook status and a drain are looked at
STOP_GRACE = 10  # seconds a runner gets between SIGTERM and SIGKILL


class Ending(Enum):
    """How a runner container's run ended."""

    EXITED = "exited"  # it exited by itself
    DRAINED = "drained"  # stopped by a drain
    LOST = "lost"  # the daemon went away: the container is gone or was stopped with it


@dataclass
class RunnerRun:
    """What the service saw of one runner container."""

    ending: Ending
    exit_code: int | None
    status: hook.HookStatus | None  # None: no job started
    seconds: float  # from the job's start (or the container's) to the end


class WatchedSlot(Protocol):
    """What a watch needs of the slot whose runner it watches (a `SlotCycle` has it)."""

    slot: Slot
    config: RunnerConfig
    registrar: Registrar
    metrics: ServiceMetrics
    drain: threading.Event

    @property
    def status_folder(self) -> Path: ...

    def say(self, text: str) -> None: ...

    def set_state(self, state: SlotState) -> None: ...


class RunnerWatch:
    """Polls one runner container, the slot's hook status and the drain, until the run ends."""

    def __init__(self, cycle: WatchedSlot, daemon: Daemon, container: str,
                 runner: JitRunner) -> None:
        self.cycle = cycle
        self.daemon = daemon
        self.container = container
        self.runner = runner
        self.status: hook.HookStatus | None = None
        self.job_began: float | None = None
        self.drain_deadline: float | None = None

    def until_end(self, began: float) -> RunnerRun:
        cycle = self.cycle
        while True:
            self._look_at_status()
            try:
                state = self.daemon.state(self.container)
            except DaemonGone:
                return self._lost()
            except DockerFailure as error:
                cycle.say(f"cannot inspect the runner: {error}")
                state = None
            if state is None or not state.running:
                return self._ended(Ending.EXITED, state, began)
            if cycle.drain.is_set() and self._drained():
                return self._ended(Ending.DRAINED, self._stopped(), began)
            time.sleep(POLL_SECONDS)

    def _look_at_status(self) -> None:
        if self.status is not None:
            return
        self.status = hook.read_status(self.cycle.status_folder)
        if self.status is None:
            return
        self.job_began = time.monotonic()
        cycle = self.cycle
        cycle.set_state(SlotState.BUSY)
        cycle.metrics.job_started(cycle.slot)
        if self.status.outcome is hook.HookOutcome.REFUSED:
            cycle.metrics.health_refused(cycle.slot)
            cycle.say(f"the hook refused the job: {self.status.detail}")
        else:
            cycle.say(f"job started on {self.status.detail}")

    def _drained(self) -> bool:
        """Whether the drain stops this runner now: an idle one at once (its registration
        deleted first, so GitHub gives it no job), a busy one at `drain_timeout`."""
        cycle = self.cycle
        if self.status is None:
            try:
                cycle.registrar.delete(self.runner.id)
                cycle.say(f"draining: deregistered the idle runner {self.runner.name}")
                return True
            except ReproGateError as error:
                if not isinstance(error, GitHubError) or error.status != 422:
                    cycle.say(f"draining: cannot deregister {self.runner.name}: {error}")
                    return True
            self._look_at_status()  # 422: it took a job just now; it is busy
        if self.drain_deadline is None:
            self.drain_deadline = time.monotonic() + cycle.config.drain_timeout
            cycle.say(f"draining: the busy job gets {cycle.config.drain_timeout:g} s to finish")
        if time.monotonic() < self.drain_deadline:
            return False
        cycle.say("draining: the job did not finish in time: stopping its runner")
        return True

    def _stopped(self) -> ContainerState | None:
        try:
            self.daemon.stop(self.container, STOP_GRACE)
            return self.daemon.state(self.container)
        except DockerFailure as error:
            self.cycle.say(f"cannot stop the runner: {error}")
            return None

    def _lost(self) -> RunnerRun:
        """The daemon went away: wait for it, then look the runner up again by its ID (a
        container keeps it through a daemon restart; a name could be a job's container)."""
        cycle = self.cycle
        if not self.daemon.wait_until_back(cycle.drain, cycle.say):
            return RunnerRun(Ending.LOST, None, self.status, self._seconds(time.monotonic()))
        try:
            state = self.daemon.state(self.container)
        except DockerFailure:
            state = None
        if state is not None and state.running:  # live-restore kept it: watch it further
            self.container = state.id
            return self.until_end(time.monotonic())
        self._look_at_status()
        code = state.exit_code if state else None
        return RunnerRun(Ending.LOST, code, self.status, self._seconds(time.monotonic()))

    def _ended(self, ending: Ending, state: ContainerState | None, began: float) -> RunnerRun:
        self._look_at_status()  # a job that started and ended between two polls
        code = state.exit_code if state is not None else None
        return RunnerRun(ending, code, self.status, self._seconds(began))

    def _seconds(self, began: float) -> float:
        return time.monotonic() - (self.job_began or began)
