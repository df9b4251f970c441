"""One slot's job cycle, in a thread of its own, until the service drains.

    health check -> leftover registration deleted -> JIT registration -> runner container
    -> wait (IDLE until the hook's status appears, then BUSY) -> cleanup (on the slot's own
    engine, the reset: the engine emptied whatever the labels and checked, slot_reset.py; on
    the shared engine, the slot's labelled containers removed; work and status folders wiped;
    registration deleted) -> health check …

A reset that leaves anything behind, or an engine that does not start again, keeps the slot
UNHEALTHY: no runner registers on an engine that is not fresh; the reset is tried again every
`health.recheck_seconds`.

Faults stay inside the cycle: a registration step that still fails after the client's own
retries (a refusal, no answer, an answer unlike the API's description, an unreadable token
file) is counted by kind and tried again with capped backoff, never ending the slot's thread; a
runner that exits non-zero without taking a job `crash_loop_limit` times in a row marks the
slot UNHEALTHY until the service restarts; a Docker daemon that stops answering is waited for,
and the runner looked up again by its ID. The runner container's name is new and random each
cycle, so a job cannot take it first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from repro_gate.errors import GateError, ReproGateError, one_line
from repro_gate.runner import hook
from repro_gate.runner.containers import (
    Bind,
    Conflict,
    Daemon,
    DaemonGone,
    DockerFailure,
    RunnerSpec,
    runner_container_name,
    runner_labels,
    service_label,
)
from repro_gate.runner.health import check_slot
from repro_gate.runner.metrics import JobOutcome, RegistrationFailure, ServiceMetrics, SlotState
from repro_gate.runner.proxy.ownership import SLOT_LABEL
from repro_gate.runner.registration import JitRunner, Registrar, runner_name
from repro_gate.runner.runner_config import EngineKind, RunnerConfig
from repro_gate.runner.runner_watch import Ending, RunnerRun, RunnerWatch
from repro_gate.runner.slot_folders import SlotFolders, wipe
from repro_gate.runner.slot_identity import GPU_GROUPS
from repro_gate.runner.slot_reset import ResetReport
from repro_gate.runner.slots import Slot

# Empties the slot's own engine (SlotEndpoint.reset); its argument: keep the dedicated
# repository's environment caches.
Reset = Callable[[bool], ResetReport]

JIT_VARIABLE = "ACTIONS_RUNNER_INPUT_JITCONFIG"  # read by the actions/runner image's run.sh
CONTAINER_SOCKET = "/var/run/docker.sock"
REGISTER_FIRST_DELAY = 2.0  # backoff after a registration GitHub still refused
REGISTER_MAX_DELAY = 120.0
NAME_TRIES = 5  # runner container names tried when one is taken (by a job's container)


def keeps_caches(run: RunnerRun) -> bool:
    """Whether the reset after `run` may keep a dedicated repository's environment caches: not
    after a job the hook refused (another repository's, on a dedicated slot)."""
    return run.status is None or run.status.outcome is not hook.HookOutcome.REFUSED


class SlotCycle:
    """The job cycle of one slot; `run()` returns when the service drains."""

    def __init__(self, slot: Slot, config: RunnerConfig, folders: SlotFolders, engine_url: str,
                 registrar: Registrar, metrics: ServiceMetrics, drain: threading.Event,
                 emit: Callable[[str], None], reset: Reset | None = None) -> None:
        self.slot = slot
        self.config = config
        self.folders = folders
        self.engine_url = engine_url  # the slot's own engine (or the shared daemon)
        self.registrar = registrar
        self.metrics = metrics
        self.drain = drain
        self.emit = emit  # writes one log line
        self.reset = reset  # None: the shared engine, cleaned by label only
        self.name = runner_name(config.name_prefix, config.host, slot)
        self.container_name = self.name  # the runner container's: random per cycle
        self.crashes = 0

    def run(self) -> None:
        try:
            while not self.drain.is_set() and self._healthy():
                runner = self._register()
                if runner is None:
                    break
                # A client per runner: a reset restarts the engine under the last one's feet.
                daemon = Daemon(self.engine_url)
                try:
                    run = self._run_runner(daemon, runner)
                    fresh = self._cleanup(daemon, runner, run)
                finally:
                    daemon.close()
                if not fresh:
                    break
                if self._crash_loop(run):
                    self._unhealthy_until_drain()
                    break
        finally:
            self.metrics.set_state(self.slot, SlotState.STOPPED)
            self.say("stopped")

    def say(self, text: str) -> None:
        self.emit(f"slot {self.slot.index}: {text}")

    def set_state(self, state: SlotState) -> None:
        self.metrics.set_state(self.slot, state)

    @property
    def status_folder(self) -> Path:
        return self.folders.status

    def _healthy(self) -> bool:
        """Wait until the slot's GPU is healthy (True) or the service drains (False)."""
        while True:
            report = check_slot(self.slot, self.config.health, wait_for_processes=True)
            if report.healthy:
                return True
            self.set_state(SlotState.UNHEALTHY)
            self.say(f"unhealthy: {report.reason}; checked again in"
                     f" {self.config.health.recheck_interval:g} s")
            if self.drain.wait(self.config.health.recheck_interval):
                return False

    def _register(self) -> JitRunner | None:
        """A JIT registration, retried with capped backoff; None when the service drains."""
        delay = REGISTER_FIRST_DELAY
        while not self.drain.is_set():
            self.set_state(SlotState.REGISTERING)
            try:
                self._delete_registrations()
                runner = self.registrar.register(self.slot, work_folder=str(self.folders.work))
            except Exception as error:  # nothing GitHub answers may end the slot's thread
                kind = RegistrationFailure.of(error)
                self.metrics.registration_failed(self.slot, kind)
                why = str(error) if isinstance(error, ReproGateError) else (
                    f"{type(error).__name__}: {one_line(error)}")
                self.say(f"registration failed ({kind.value}): {why}; next try in {delay:g} s")
                self.drain.wait(delay)
                delay = min(delay * 2, REGISTER_MAX_DELAY)
                continue
            self.say(f"registered {runner.name} (id {runner.id})")
            return runner
        return None

    def _delete_registrations(self) -> None:
        """A registration left with this slot's name (a crash, a runner that never ran) would
        make GitHub refuse the new one as a duplicate."""
        for old in self.registrar.list_runners():
            if old.name == self.name:
                self.registrar.delete(old.id)
                self.say(f"deleted the leftover registration {old.name} (id {old.id})")

    def _spec(self, runner: JitRunner) -> RunnerSpec:
        environment = {JIT_VARIABLE: runner.encoded_jit_config,
                       **hook.runner_environment(
                           self.slot, allow_no_gpu=self.config.health.allow_no_gpu,
                           repository=self.config.isolation.dedicated_repository),
                       **dict(self.config.runner.environment)}
        hooks = self.config.work_root / "hooks"
        binds = (Bind(hooks, hook.CONTAINER_HOOK_DIR, read_only=True),
                 Bind(self.folders.work, str(self.folders.work)),
                 Bind(self.folders.status, hook.CONTAINER_STATUS_DIR),
                 Bind(self.folders.proxy_socket, CONTAINER_SOCKET))
        service = service_label(self.config.name_prefix, self.config.host)
        return RunnerSpec(self.container_name, self.config.runner.image,
                          self.config.runner.command,
                          tuple(environment.items()), self.config.runner.network,
                          runner_labels(service, self.slot.uuid, self.slot.index),
                          self.slot.uuid, binds, groups=self._gpu_groups())

    def _gpu_groups(self) -> tuple[str, ...]:
        """Group 0 of the slot's own engine is the slot's group on the host, which owns its
        GPU's node; on the shared engine group 0 is the host's root group: never added."""
        rootless = self.config.isolation.engine is EngineKind.ROOTLESS
        return GPU_GROUPS if rootless else ()

    def _run_runner(self, daemon: Daemon, runner: JitRunner) -> RunnerRun:
        """Start the runner and watch it until it ends (the status folder is empty: start-up
        and each cleanup wipe it)."""
        began = time.monotonic()
        try:
            container = self._create(daemon, runner)
            daemon.start(container)
            # The log holds the output from the start: nothing is missed by following it now.
            output = daemon.copy_output(container, self.runner_line)
        except DockerFailure as error:
            self.say(f"runner container not started: {error}")
            if isinstance(error, DaemonGone):
                daemon.wait_until_back(self.drain, self.say)
                return RunnerRun(Ending.LOST, None, None, 0.0)
            return RunnerRun(Ending.EXITED, None, None, 0.0)  # counts as a crash
        self.set_state(SlotState.IDLE)
        run = RunnerWatch(self, daemon, container, runner).until_end(began)
        output.finish()
        self._finished(run)
        return run

    def _create(self, daemon: Daemon, runner: JitRunner) -> str:
        """The runner container under a new random name; a name taken (a job's container
        cannot take the service's) is not a crash: another is tried."""
        for attempt in range(1, NAME_TRIES + 1):
            self.container_name = runner_container_name(self.name)
            try:
                return daemon.create_runner(self._spec(runner))
            except Conflict as error:
                if attempt == NAME_TRIES:
                    raise
                self.say(f"{error}: trying another name")
        raise AssertionError("unreachable: the last try returns or raises")

    def runner_line(self, line: str) -> None:
        self.emit(f"slot {self.slot.index} runner: {line}")

    def _finished(self, run: RunnerRun) -> None:
        """Metrics and a log line for a run that ended."""
        code = "?" if run.exit_code is None else str(run.exit_code)
        if run.status is None:
            self.say(f"runner ended without a job ({run.ending.value}, exit code {code})")
            return
        if run.status.outcome is hook.HookOutcome.REFUSED:
            outcome = JobOutcome.REFUSED
        elif run.ending is Ending.DRAINED:
            outcome = JobOutcome.CANCELLED
        elif run.ending is Ending.LOST or run.exit_code not in (0, None):
            outcome = JobOutcome.CRASHED
        else:
            outcome = JobOutcome.COMPLETED
        self.metrics.job_finished(self.slot, outcome, run.seconds)
        self.say(f"job {outcome.value} after {run.seconds:.1f} s (runner exit code {code})")

    def _crash_loop(self, run: RunnerRun) -> bool:
        """Count a runner that exited non-zero without a job; True at `crash_loop_limit`."""
        if run.status is not None:
            self.crashes = 0
            return False
        if run.ending is not Ending.EXITED or run.exit_code == 0:
            return False  # a daemon restart or a drain is not the runner's fault
        self.crashes += 1
        self.metrics.runner_crashed(self.slot)
        return self.crashes >= self.config.runner.crash_loop_limit

    def _unhealthy_until_drain(self) -> None:
        """A crash loop is the image's or the configuration's fault, not the GPU's: no
        recheck would clear it."""
        self.set_state(SlotState.UNHEALTHY)
        self.say(f"unhealthy: the runner container crashed {self.crashes} times in a row"
                 " without taking a job; the slot stays unhealthy until the service restarts"
                 " (crash loops are not rechecked)")
        self.drain.wait()

    def _cleanup(self, daemon: Daemon, runner: JitRunner, run: RunnerRun) -> bool:
        """Nothing of the job survives: engine, files, registration. False when the service
        drained before the slot was fresh again."""
        self.set_state(SlotState.CLEANING)
        if self.reset is None:
            self._remove_labelled(daemon)
            wipe(self.folders.work)
            wipe(self.folders.status)
            fresh = True
        else:
            fresh = self._reset(self.reset, keep_caches=keeps_caches(run))
        try:
            if self.registrar.delete(runner.id):
                self.say(f"deleted the registration {runner.name} (id {runner.id})")
        except ReproGateError as error:  # the next registration deletes it by name
            self.say(f"the registration {runner.name} was not deleted: {error}")
        return fresh

    def _reset(self, reset: Reset, keep_caches: bool) -> bool:
        """The slot's engine emptied and checked; until it is fresh the slot is UNHEALTHY and
        the reset tried again. False when the service drains first."""
        while True:
            try:
                report = reset(keep_caches)
            except GateError as error:
                reason = str(error)
            else:
                if report.fresh:
                    self.say(f"reset: the engine is fresh ({report.seconds:.1f} s)")
                    return True
                reason = f"survived the reset: {', '.join(report.survivors)}"
            self.set_state(SlotState.UNHEALTHY)
            self.say(f"unhealthy: {reason}; reset again in"
                     f" {self.config.health.recheck_interval:g} s")
            if self.drain.wait(self.config.health.recheck_interval):
                return False

    def _remove_labelled(self, daemon: Daemon) -> None:
        """The shared engine: the containers carrying the slot's label."""
        while True:
            try:
                removed = daemon.remove_labelled(f"{SLOT_LABEL}={self.slot.uuid}")
                break
            except DaemonGone:
                if not daemon.wait_until_back(self.drain, self.say):
                    self.say("cleanup skipped: the Docker daemon did not come back before"
                             " the drain; a restart of the service cleans the slot")
                    removed = []
                    break
            except DockerFailure as error:
                self.say(f"cleanup: {error}")
                removed = []
                break
        if left := [name for name in removed if name != self.container_name]:
            self.say(f"removed the job's containers: {', '.join(left)}")
