"""The repro-gate probe, installed by `sitecustomize` into the user's training process.

Deterministic mode switches torch's determinism knobs on when torch is imported; it seeds
`random`, numpy and torch only when the gate was given a seed (REPRO_GATE_SEED: seeding is the
training's job). Default mode changes nothing in training. In every mode the training's own
seeding calls and the first parameter's creation are recorded (_repro_gate_seeding), and every
process that takes an optimizer step records into `$REPRO_GATE_RUN_DIR/.repro-gate/`, under its
rank's file names (`rank_file`: rank 0 keeps the plain names). The rank and world size come from
torch.distributed when it is initialised at the first step, else from RANK (or LOCAL_RANK) and
WORLD_SIZE; a process without them is rank 0 of 1. So torchrun's workers and mp.spawn's
processes record, one file set per rank; the torchrun agent, DataLoader workers and a `prep.py`
before the training take no step and write no trajectory. The first process of the run (the
owner) also writes status.json from the start, so that a run that never steps has a status; it
leaves rank 0's files alone once another process took them over.

- trajectory.jsonl: one line per optimizer step, the evidence for the cause of a divergence:
  digests of the model's input batch ("inputs"), the loss's exact bits, of the gradients just
  before the optimizer step ("grads", a step pre-hook) and of the parameters after it ("params");
  the first line also has the parameters before the first step ("init"). "time" is the wall
  time since the previous step's line was written (or torch's import), less the probe's own time
  in the pre-hook. On CPU, large tensors' digests are sampled ("sampled": K); on accelerators a
  record is read, written and matched one step later (no host sync): see _repro_gate_steps.
- alerts.json: nondeterministic-op warnings and strict-mode errors, per user source line;
  status.json and fingerprint.json, written when the process finishes or the probe stops it.
- `stop`, written by the gate when fail-fast found the run differing from run A: every process
  that steps stops at its next step (status `stopped: "stop_file"`), writing its files first.

Only the standard library is imported here until torch or numpy is imported by the user. The
probe's other modules, all in this directory and named `_repro_gate_*`:

- _repro_gate_contract: the variables and files shared with the gate; _repro_gate_files: reading
  variables, writing JSON atomically; _repro_gate_import_watch: a callback when a module is
  imported; _repro_gate_patches: wrappers around backward, warnings and the exception hooks;
  _repro_gate_param_names: parameters' model names; _repro_gate_ranks: the rank and world size.
- _repro_gate_trajectory: writing trajectory.jsonl (the gate follows it for fail-fast).
- Imported once torch is: _repro_gate_steps (one step's record), _repro_gate_step_inputs (the
  input batch), _repro_gate_digest and _repro_gate_host_read (the lagged read),
  _repro_gate_alerts, _repro_gate_fingerprint; for the localisation run only,
  _repro_gate_localise and _repro_gate_rerun (the divergent step's module calls run again).
- _repro_gate_cost_arms: the cost run's knobs, switched between blocks; _repro_gate_resume: the
  resume check (the stop after a checkpoint, the resumed numbering, the records of state).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import sys
import time
import warnings
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

from _repro_gate_contract import (
    ALERTS_FILE,
    ENV_DETERMINISM,
    ENV_LOCALISE_STEP,
    ENV_MAX_STEPS,
    ENV_MODE,
    ENV_OWNER_PID,
    ENV_RUN_DIR,
    ENV_SEED,
    FINGERPRINT_FILE,
    GATE_STOP_REASON,
    PROBE_SUBDIR,
    STATUS_FILE,
    STOP_EXIT_CODE,
    STOP_FILE,
    TRAJECTORY_FILE,
    rank_file,
)
from _repro_gate_cost_arms import CostArms, cost_arms
from _repro_gate_files import int_env, read_json, write_json
from _repro_gate_import_watch import ImportWatcher, import_optional
from _repro_gate_param_names import ParameterNames
from _repro_gate_patches import chain_excepthooks, wrap_backward, wrap_showwarnmsg
from _repro_gate_ranks import rank_and_world_size
from _repro_gate_resume import STOP_REASON, Resume
from _repro_gate_seeding import Seeding
from _repro_gate_trajectory import TrajectoryWriter

if TYPE_CHECKING:
    from _repro_gate_alerts import AlertRecorder
    from _repro_gate_step_inputs import StepInputs
    from _repro_gate_steps import StepRecorder

MAX_ERRORS = 20
_PROBE_DIR = os.path.dirname(os.path.realpath(__file__))

_probe: Probe | None = None


def install() -> None:
    """Set the probe up for this process; a no-op when REPRO_GATE_RUN_DIR is unset."""
    global _probe
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir or _probe is not None:
        return
    owner_pid = os.environ.get(ENV_OWNER_PID)
    owner = owner_pid is None or owner_pid == str(os.getpid())
    if owner:
        os.environ[ENV_OWNER_PID] = str(os.getpid())
    _probe = Probe(os.path.join(run_dir, PROBE_SUBDIR), owner)
    _probe.start()


class Probe:
    """State of the probe in one process."""

    def __init__(self, out_dir: str, owner: bool) -> None:
        self.out_dir = out_dir
        self.owner = owner  # the run's first process: writes a status even when it never steps
        self.writable = True  # False once out_dir turned out not writable
        self.claimed = False  # True from this process's first optimizer step
        self.rank, self.world_size = 0, 1
        self.pid = os.getpid()
        self.errors: list[str] = []
        self.mode = os.environ.get(ENV_MODE) or "default"
        self.strict = os.environ.get(ENV_DETERMINISM) == "strict"
        self.seeding = Seeding(int_env(ENV_SEED, None, self._error), self._error)
        self.max_steps = int_env(ENV_MAX_STEPS, None, self._error)
        if self.mode not in ("deterministic", "default", "cost"):
            self._error(f"unknown {ENV_MODE} {self.mode!r}: observing only")
        self.resume = Resume(out_dir, self._error)
        self.steps = self.resume.first_step or 0
        self.stopped: str | None = None
        self.stop_step: int | None = None
        self.last_step_end = time.perf_counter()
        self.last_loss: Any = None
        self._alerts: AlertRecorder | None = None  # set once torch is imported
        self._trajectory: TrajectoryWriter | None = None  # set at the first step
        self._param_names = ParameterNames(self._on_root_call)
        self._inputs: StepInputs | None = None  # set once torch is imported
        self._recorder: StepRecorder | None = None  # set once torch is imported
        self._torch: Any = None
        self._fingerprint: Any = None
        self._arms: CostArms | None = None  # the cost run's arms, once torch is imported

    @property
    def deterministic(self) -> bool:
        return self.mode == "deterministic"

    def _is_mine(self) -> bool:
        # A fork shares this object until the at-fork hook has reset it for the child.
        return self.writable and os.getpid() == self.pid

    def _writes_files(self) -> bool:
        """True when this process's files are its to write: it stepped, or it is the owner and
        no other process took rank 0's files over (the torchrun agent, mp.spawn's parent)."""
        if not self._is_mine():
            return False
        if self.claimed:
            return True
        if not self.owner:
            return False
        status = read_json(os.path.join(self.out_dir, STATUS_FILE))
        return not isinstance(status, dict) or status.get("pid") in (None, self.pid)

    # ----- start-up -------------------------------------------------------------------------

    def start(self) -> None:
        if self.deterministic:
            self.seeding.seed_random(random)
        self.seeding.watch_random(random)
        watched = {"torch": self._on_torch_imported, "numpy": self._on_numpy_imported}
        sys.meta_path.insert(0, ImportWatcher(watched))
        os.register_at_fork(after_in_child=self._after_fork)
        if self.owner:
            self._start_writing()

    def _start_writing(self) -> None:
        """Create the output directory, write a first status and arrange the final one."""
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            self._write_status()
        except OSError as error:
            self.writable = False
            print(f"repro-gate probe: cannot write {self.out_dir}: {error}", file=sys.stderr)
            return
        atexit.register(self.finish)
        chain_excepthooks(self._on_uncaught, self._error)

    def _after_fork(self) -> None:
        # A forked child (DataLoader worker, fork-started rank) is a process of its own: it
        # records only if it steps, under its own rank.
        self.pid = os.getpid()
        self.owner = self.claimed = False
        self.steps = self.resume.first_step or 0
        self.stopped = self.stop_step = None
        self._trajectory = None
        if self._recorder is not None:
            self._recorder.reset()

    def _on_numpy_imported(self, numpy: ModuleType) -> None:
        try:
            if self.deterministic:
                self.seeding.seed_numpy(numpy)
            self.seeding.watch_numpy(numpy)
        except Exception as error:
            self._error(f"seeding numpy: {error!r}")

    def _on_torch_imported(self, torch: ModuleType) -> None:
        self._torch = torch
        self.seeding.on_torch_imported(torch, self.deterministic, self.strict)
        if not self._is_mine():
            return
        # Every process watches: which of them steps (and so records) is known only later.
        try:
            self._install_torch_hooks(torch)
        except Exception as error:
            self._error(f"installing torch hooks: {error!r}")
        self._fingerprint = import_optional("_repro_gate_fingerprint", "the fingerprint module",
                                            self._error)
        if self._fingerprint is not None:
            try:
                self._fingerprint.install_torch_observers()
            except Exception as error:
                self._error(f"fingerprint observers: {error!r}")
        self.last_step_end = time.perf_counter()

    def _install_torch_hooks(self, torch: Any) -> None:
        from _repro_gate_alerts import WARNING_PATTERN, AlertRecorder
        from _repro_gate_hook_ids import register_optimizer_step_hooks
        from _repro_gate_step_inputs import StepInputs
        from _repro_gate_steps import SAMPLE_EVERY, SAMPLE_MIN_ELEMENTS, StepRecorder

        self._alerts = AlertRecorder([os.path.dirname(torch.__file__), _PROBE_DIR],
                                     lambda: self.steps + 1)
        self._inputs = StepInputs(torch, self._error, (SAMPLE_EVERY, SAMPLE_MIN_ELEMENTS))
        self._recorder = StepRecorder(self._inputs)
        warnings.filterwarnings("always", message=WARNING_PATTERN, category=UserWarning)
        wrap_showwarnmsg(self._on_warning, self._error)
        wrap_backward(torch, self._note_loss)
        register_optimizer_step_hooks(self._before_optimizer_step, self._on_optimizer_step)
        self._param_names.watch_forward(True)
        self._arms = cost_arms(self.mode, torch, self._error, self.max_steps)
        self.resume.install(torch, lambda: self.steps, self._param_names)
        if os.environ.get(ENV_LOCALISE_STEP):
            from _repro_gate_localise import install as install_localiser

            install_localiser(torch, self.out_dir, self._error)

    # ----- loss ----------------------------------------------------------------------------

    def _note_loss(self, tensor: Any) -> None:
        torch = self._torch
        if isinstance(tensor, torch.Tensor) and tensor.numel() == 1 and tensor.is_floating_point():
            self.last_loss = tensor.detach()
        else:
            self.last_loss = None

    # ----- steps ---------------------------------------------------------------------------

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._is_mine() or self.stopped:
            return
        if not self.claimed:
            self._claim()
            if not self._is_mine():
                return
        try:
            self._record_step(optimizer)
        except Exception as error:
            self._error(f"recording step {self.steps}: {error!r}")
        self.resume.after_step(self.rank)
        if os.path.exists(os.path.join(self.out_dir, STOP_FILE)):  # the gate's fail-fast
            self._stop(GATE_STOP_REASON, self.steps)
        if self.max_steps is not None and self.steps >= self.max_steps:
            self._stop("max_steps", self.steps)
        self.last_step_end = time.perf_counter()

    def _on_root_call(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        if self._inputs is not None and self._is_mine():
            self._inputs.on_root_call(module, args, kwargs, output)

    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._is_mine() or self.stopped:
            return
        if self.resume.before_step(optimizer, self.steps):
            self._stop(STOP_REASON, self.steps)
        started = time.perf_counter()
        try:
            named, _ = self._param_names.named_parameters(optimizer)
            if self._recorder is not None:
                self._recorder.before_step(optimizer, named, self.steps + 1)
        except Exception as error:
            self._error(f"recording gradients at step {self.steps + 1}: {error!r}")
        self.last_step_end += time.perf_counter() - started  # the probe's time is not the step's

    def _record_step(self, optimizer: Any) -> None:
        """Write the records this step completed (on an accelerator, the previous step's)."""
        header = {"step": self.steps + 1, "time": time.perf_counter() - self.last_step_end}
        named, complete = self._param_names.named_parameters(optimizer)
        self._param_names.watch_forward(not complete)
        if self._arms is not None:  # labels the header with its arm; the run ends with its plan
            self.max_steps = self._arms.on_step(header, self._write_json)
        self.steps += 1
        if self._recorder is None:
            return
        records = self._recorder.after_step(optimizer, named, header, self.last_loss)
        if self._trajectory is not None:
            self._trajectory.extend(records)

    def _claim(self) -> None:
        """At the first step: learn the rank and take its files."""
        self.rank, self.world_size = rank_and_world_size(self._torch, self._error)
        self.claimed = True
        path = os.path.join(self.out_dir, rank_file(TRAJECTORY_FILE, self.rank))
        self._trajectory = TrajectoryWriter(path, append=self.resume.first_step is not None)
        if self._fingerprint is not None:
            self._fingerprint.note_process_group()
        if self.owner:
            self._write_status_safely()  # the owner's rank may not be 0
        else:
            self._start_writing()

    def _stop(self, reason: str, step: int) -> None:
        if not self.claimed:  # stopped before its first step: its files are still its own
            self._claim()
        self.stopped = reason
        self.stop_step = step
        self.finish()
        self.resume.before_exit(reason, self.world_size)  # the other ranks' files, written
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(STOP_EXIT_CODE)

    # ----- alerts --------------------------------------------------------------------------

    def _on_warning(self, message: warnings.WarningMessage, frame: FrameType) -> bool:
        """Record one warning; False when it repeats a site already shown to the user."""
        if not self._is_mine() or self._alerts is None:
            return True
        return self._alerts.record_warning(message, frame)

    def _on_uncaught(self, error: BaseException | None, tb: Any, finish: bool) -> None:
        if not self._is_mine() or self._alerts is None:
            return
        self._alerts.record_uncaught(error, tb)
        if finish:
            self.finish()

    # ----- finishing -----------------------------------------------------------------------

    def finish(self) -> None:
        """Write alerts, fingerprint and status; safe to call more than once."""
        if not self._writes_files():
            return
        try:
            if self._trajectory is not None:
                self._trajectory.extend(self._recorder.flush() if self._recorder else [])
                self._trajectory.flush()
            alerts = self._alerts.as_json() if self._alerts is not None else []
            self._write_json(ALERTS_FILE, alerts)
        except Exception as error:
            self._error(f"writing alerts: {error!r}")
        if self._fingerprint is not None:
            try:
                collected = self._fingerprint.collect()
                (collected.get("random") or {})["seeding"] = self.seeding.as_json()
                self._write_json(FINGERPRINT_FILE, collected)
            except Exception as error:
                self._error(f"collecting the fingerprint: {error!r}")
        self._write_status_safely()

    def _write_status_safely(self) -> None:
        try:
            self._write_status()
        except Exception as error:
            print(f"repro-gate probe: cannot write status: {error!r}", file=sys.stderr)

    def _write_status(self) -> None:
        self._write_json(STATUS_FILE, {
            "probe": "ok", "pid": self.pid, "rank": self.rank, "world_size": self.world_size,
            "mode": self.mode, "steps": self.steps, "stopped": self.stopped,
            "stop_step": self.stop_step, "errors": self.errors})

    def _write_json(self, name: str, value: Any) -> None:
        write_json(os.path.join(self.out_dir, rank_file(name, self.rank)), value)

    def _error(self, text: str) -> None:
        if len(self.errors) < MAX_ERRORS and text not in self.errors:
            self.errors.append(text)
