"""The repro-gate probe, installed by `sitecustomize` into the user's training process.

Deterministic mode seeds `random` at once, numpy when it is imported and torch when it is
imported, and switches torch's determinism knobs on. Default mode changes nothing in training. In
both modes the first process of the run (not its DataLoader workers or subprocesses) records into
`$REPRO_GATE_RUN_DIR/.repro-gate/`:

- trajectory.jsonl: one line per optimizer step: parameter digests and the loss's exact bits.
  "time" is the wall time since the previous step's line was written; for the first step, since
  torch finished importing.
- alerts.json: nondeterministic-op warnings and strict-mode errors, per user source line.
- status.json and fingerprint.json, written when the process finishes or the probe stops it.

Only the standard library is imported here until torch or numpy is imported by the user. The
probe's other modules, all in this directory and named `_repro_gate_*`:

- _repro_gate_contract: the variables and file names shared with the gate.
- _repro_gate_import_watch: the hook that calls back when torch or numpy is imported.
- _repro_gate_patches: the wrappers around backward, warnings and the exception hooks.
- _repro_gate_param_names: model names for the optimizer's parameters.
- _repro_gate_trajectory: writing trajectory.jsonl and matching a reference trajectory.
- _repro_gate_digest (needs torch), _repro_gate_alerts, _repro_gate_fingerprint: imported once
  torch is.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
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
    ENV_MAX_STEPS,
    ENV_MODE,
    ENV_OWNER_PID,
    ENV_REFERENCE_TRAJECTORY,
    ENV_RUN_DIR,
    ENV_SEED,
    FINGERPRINT_FILE,
    PROBE_SUBDIR,
    STATUS_FILE,
    STOP_EXIT_CODE,
    TRAJECTORY_FILE,
)
from _repro_gate_import_watch import ImportWatcher
from _repro_gate_param_names import ParameterNames
from _repro_gate_patches import chain_excepthooks, wrap_backward, wrap_showwarnmsg
from _repro_gate_trajectory import ReferenceTrajectory, TrajectoryWriter

if TYPE_CHECKING:
    from _repro_gate_alerts import AlertRecorder

MAX_ERRORS = 20
_PROBE_DIR = os.path.dirname(os.path.realpath(__file__))

_probe: Probe | None = None


def install() -> None:
    """Set the probe up for this process; a no-op when REPRO_GATE_RUN_DIR is unset."""
    global _probe
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir or _probe is not None:
        return
    owner = os.environ.get(ENV_OWNER_PID)
    recording = owner is None or owner == str(os.getpid())
    if recording:
        os.environ[ENV_OWNER_PID] = str(os.getpid())
    _probe = Probe(os.path.join(run_dir, PROBE_SUBDIR), recording)
    _probe.start()


class Probe:
    """State of the probe in one process."""

    def __init__(self, out_dir: str, recording: bool) -> None:
        self.out_dir = out_dir
        self.recording = recording
        self.pid = os.getpid()
        self.errors: list[str] = []
        self.mode = os.environ.get(ENV_MODE) or "default"
        self.strict = os.environ.get(ENV_DETERMINISM) == "strict"
        self.seed: int = self._int_env(ENV_SEED, 0) or 0
        self.max_steps = self._int_env(ENV_MAX_STEPS, None)
        reference_path = os.environ.get(ENV_REFERENCE_TRAJECTORY) or None
        if self.mode not in ("deterministic", "default"):
            self._error(f"unknown {ENV_MODE} {self.mode!r}: observing only")
        self.steps = 0
        self.stopped: str | None = None
        self.stop_step: int | None = None
        self.last_step_end = time.perf_counter()
        self.last_loss: Any = None
        self._alerts: AlertRecorder | None = None  # set once torch is imported
        self._trajectory = TrajectoryWriter(os.path.join(out_dir, TRAJECTORY_FILE))
        self._reference = (
            ReferenceTrajectory(reference_path, self._error) if reference_path else None
        )
        self._param_names = ParameterNames()
        self._torch: Any = None
        self._fingerprint: Any = None

    @property
    def deterministic(self) -> bool:
        return self.mode == "deterministic"

    def _is_recording(self) -> bool:
        # Forked children inherit the probe's hooks; only the owner process records.
        return self.recording and os.getpid() == self.pid

    # ----- start-up -------------------------------------------------------------------------

    def start(self) -> None:
        if self.deterministic:
            random.seed(self.seed)
        watched = {"torch": self._on_torch_imported}
        if self.deterministic:
            watched["numpy"] = self._on_numpy_imported
        sys.meta_path.insert(0, ImportWatcher(watched))
        if not self.recording:
            return
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            self._write_status()
        except OSError as error:
            self.recording = False
            print(f"repro-gate probe: cannot write {self.out_dir}: {error}", file=sys.stderr)
            return
        atexit.register(self.finish)
        chain_excepthooks(self._on_uncaught, self._error)

    def _on_numpy_imported(self, numpy: ModuleType) -> None:
        try:
            numpy.random.seed(self.seed % 2**32)
        except Exception as error:
            self._error(f"seeding numpy: {error!r}")

    def _on_torch_imported(self, torch: ModuleType) -> None:
        self._torch = torch
        if self.deterministic:
            try:
                torch.manual_seed(self.seed)
                torch.use_deterministic_algorithms(True, warn_only=not self.strict)
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
            except Exception as error:
                self._error(f"deterministic setup: {error!r}")
        if not self._is_recording():
            return
        try:
            self._install_torch_hooks(torch)
        except Exception as error:
            self._error(f"installing torch hooks: {error!r}")
        self._fingerprint = self._import_fingerprint()
        if self._fingerprint is not None:
            try:
                self._fingerprint.install_torch_observers()
            except Exception as error:
                self._error(f"fingerprint observers: {error!r}")
        self.last_step_end = time.perf_counter()

    def _install_torch_hooks(self, torch: Any) -> None:
        from _repro_gate_alerts import WARNING_PATTERN, AlertRecorder

        self._alerts = AlertRecorder([os.path.dirname(torch.__file__), _PROBE_DIR])
        warnings.filterwarnings("always", message=WARNING_PATTERN, category=UserWarning)
        wrap_showwarnmsg(self._on_warning, self._error)
        wrap_backward(torch, self._note_loss)
        optimizers = importlib.import_module("torch.optim.optimizer")
        optimizers.register_optimizer_step_post_hook(self._on_optimizer_step)
        self._param_names.watch_forward(True)

    def _import_fingerprint(self) -> Any:
        try:
            import _repro_gate_fingerprint
        except ImportError:
            return None
        except Exception as error:
            self._error(f"importing the fingerprint module: {error!r}")
            return None
        return _repro_gate_fingerprint

    # ----- loss ----------------------------------------------------------------------------

    def _note_loss(self, tensor: Any) -> None:
        torch = self._torch
        if isinstance(tensor, torch.Tensor) and tensor.numel() == 1 and tensor.is_floating_point():
            self.last_loss = tensor.detach()
        else:
            self.last_loss = None

    def _loss_bits(self) -> str | None:
        if self.last_loss is None:
            return None
        return float.hex(float(self.last_loss.item()))

    # ----- steps ---------------------------------------------------------------------------

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._is_recording() or self.stopped:
            return
        try:
            record = self._record_step(optimizer)
        except Exception as error:
            self._error(f"recording step {self.steps + 1}: {error!r}")
            record = None
        if record is not None and self._reference is not None and self._reference.differs(record):
            self._stop("divergence")
        if self.max_steps is not None and self.steps >= self.max_steps:
            self._stop("max_steps")
        self.last_step_end = time.perf_counter()

    def _record_step(self, optimizer: Any) -> dict[str, Any]:
        from _repro_gate_digest import digest_tensors

        elapsed = time.perf_counter() - self.last_step_end
        named, complete = self._param_names.named_parameters(optimizer)
        self._param_names.watch_forward(not complete)
        digests = digest_tensors([param for _, param in named])
        self.steps += 1
        record = {
            "step": self.steps,
            "time": elapsed,
            "loss": self._loss_bits(),
            "params": {name: digests[i] for i, (name, _) in enumerate(named)},
        }
        self._trajectory.append(record)
        return record

    def _stop(self, reason: str) -> None:
        self.stopped = reason
        self.stop_step = self.steps
        self.finish()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(STOP_EXIT_CODE)

    # ----- alerts --------------------------------------------------------------------------

    def _on_warning(self, message: warnings.WarningMessage, frame: FrameType) -> bool:
        """Record one warning; False when it repeats a site already shown to the user."""
        if not self._is_recording() or self._alerts is None:
            return True
        return self._alerts.record_warning(message, frame)

    def _on_uncaught(self, error: BaseException | None, tb: Any, finish: bool) -> None:
        if not self._is_recording() or self._alerts is None:
            return
        self._alerts.record_uncaught(error, tb)
        if finish:
            self.finish()

    # ----- finishing -----------------------------------------------------------------------

    def finish(self) -> None:
        """Write alerts, fingerprint and status; safe to call more than once."""
        if not self._is_recording():
            return
        try:
            self._trajectory.flush()
            alerts = self._alerts.as_json() if self._alerts is not None else []
            self._write_json(ALERTS_FILE, alerts)
        except Exception as error:
            self._error(f"writing alerts: {error!r}")
        if self._fingerprint is not None:
            try:
                self._write_json(FINGERPRINT_FILE, self._fingerprint.collect())
            except Exception as error:
                self._error(f"collecting the fingerprint: {error!r}")
        try:
            self._write_status()
        except Exception as error:
            print(f"repro-gate probe: cannot write status: {error!r}", file=sys.stderr)

    def _write_status(self) -> None:
        self._write_json(
            STATUS_FILE,
            {
                "probe": "ok",
                "mode": self.mode,
                "steps": self.steps,
                "stopped": self.stopped,
                "stop_step": self.stop_step,
                "errors": self.errors,
            },
        )

    def _write_json(self, name: str, value: Any) -> None:
        path = os.path.join(self.out_dir, name)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=1)
            handle.write("\n")
        os.replace(temporary, path)

    def _error(self, text: str) -> None:
        if len(self.errors) < MAX_ERRORS and text not in self.errors:
            self.errors.append(text)

    def _int_env(self, name: str, default: int | None) -> int | None:
        value = os.environ.get(name)
        if not value:
            return default
        try:
            return int(value)
        except ValueError:
            self._error(f"{name}={value!r} is not an integer; using {default}")
            return default
