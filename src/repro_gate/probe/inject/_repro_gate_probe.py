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

Only the standard library is imported here until torch or numpy is imported by the user.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import random
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

# The contract with the gate (same literal values as repro_gate.probe).
ENV_RUN_DIR = "REPRO_GATE_RUN_DIR"
ENV_MODE = "REPRO_GATE_MODE"
ENV_SEED = "REPRO_GATE_SEED"
ENV_DETERMINISM = "REPRO_GATE_DETERMINISM"
ENV_REFERENCE_TRAJECTORY = "REPRO_GATE_REFERENCE_TRAJECTORY"
ENV_MAX_STEPS = "REPRO_GATE_MAX_STEPS"
PROBE_SUBDIR = ".repro-gate"
TRAJECTORY_FILE = "trajectory.jsonl"
ALERTS_FILE = "alerts.json"
STATUS_FILE = "status.json"
FINGERPRINT_FILE = "fingerprint.json"
STOP_EXIT_CODE = 86

# The pid of the process that records; its children see it and stay silent.
ENV_OWNER_PID = "REPRO_GATE_PROBE_OWNER_PID"
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


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Calls back right after a watched top-level module has been executed for the first time."""

    def __init__(self, callbacks: dict[str, Callable[[ModuleType], None]]) -> None:
        self._callbacks = callbacks
        self._searching: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        callback = self._callbacks.get(name)
        if callback is None or name in self._searching:
            return None
        self._searching.add(name)
        try:
            spec = self._find_with_others(name, path, target)
        finally:
            self._searching.discard(name)
        loader = getattr(spec, "loader", None)
        if loader is None:
            return spec
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                original_exec(module)
            finally:
                vars(loader).pop("exec_module", None)
            if self._callbacks.pop(name, None) is not None:
                callback(module)
            if not self._callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            return spec  # an unusual loader: the callback runs at the next opportunity instead
        return spec

    def _find_with_others(self, name: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return spec
        return None


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
        self.reference_path = os.environ.get(ENV_REFERENCE_TRAJECTORY) or None
        if self.mode not in ("deterministic", "default"):
            self._error(f"unknown {ENV_MODE} {self.mode!r}: observing only")
        self.steps = 0
        self.stopped: str | None = None
        self.stop_step: int | None = None
        self.last_step_end = time.perf_counter()
        self.last_loss: Any = None
        self.alerts: dict[tuple[str, str, int, str], Any] = {}
        self._shown_alert_sites: set[tuple[str, str, int]] = set()
        self._trajectory: Any = None
        self._reference: dict[int, dict[str, Any]] | None = None
        self._roots: list[weakref.ref[Any]] = []
        self._root_ids: set[int] = set()
        self._roots_version = 0
        self._forward_state = threading.local()
        self._forward_hooks: list[Any] = []
        self._names: weakref.WeakKeyDictionary[Any, list[tuple[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )
        self._user_frames: Any = None
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
        sys.meta_path.insert(0, _ImportWatcher(watched))
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
        self._chain_excepthooks()

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
        from _repro_gate_alerts import WARNING_PATTERN, UserFrames

        self._user_frames = UserFrames([os.path.dirname(torch.__file__), _PROBE_DIR])
        warnings.filterwarnings("always", message=WARNING_PATTERN, category=UserWarning)
        self._wrap_showwarnmsg()
        self._wrap_backward(torch)
        optimizers = importlib.import_module("torch.optim.optimizer")
        optimizers.register_optimizer_step_post_hook(self._on_optimizer_step)
        self._watch_forward(True)

    def _import_fingerprint(self) -> Any:
        try:
            import _repro_gate_fingerprint
        except ImportError:
            return None
        except Exception as error:
            self._error(f"importing the fingerprint module: {error!r}")
            return None
        return _repro_gate_fingerprint

    # ----- models and parameter names ------------------------------------------------------

    def _watch_forward(self, on: bool) -> None:
        """Note root modules while on; the hooks go away once every optimizer's names are known."""
        if on and not self._forward_hooks:
            hooks = importlib.import_module("torch.nn.modules.module")
            self._forward_hooks = [
                hooks.register_module_forward_pre_hook(self._on_forward_pre),
                hooks.register_module_forward_hook(self._on_forward_post, always_call=True),
            ]
        elif not on:
            for handle in self._forward_hooks:
                handle.remove()
            self._forward_hooks = []

    def _on_forward_pre(self, module: Any, args: Any) -> None:
        depth = getattr(self._forward_state, "depth", 0)
        self._forward_state.depth = depth + 1
        if depth == 0 and id(module) not in self._root_ids:
            self._roots = [ref for ref in self._roots if ref() is not None]
            self._root_ids = {id(ref()) for ref in self._roots}
            if id(module) not in self._root_ids:
                self._roots.append(weakref.ref(module))
                self._root_ids.add(id(module))
                self._roots_version += 1

    def _on_forward_post(self, module: Any, args: Any, output: Any) -> None:
        self._forward_state.depth = max(0, getattr(self._forward_state, "depth", 1) - 1)

    def _named_parameters(self, optimizer: Any) -> tuple[list[tuple[str, Any]], bool]:
        """The optimizer's parameters with their model names, in model order; and whether all
        of them have a model name."""
        cached = self._names.get(optimizer)
        params = [
            (f"param_group{i}.{j}", param)
            for i, group in enumerate(optimizer.param_groups)
            for j, param in enumerate(group["params"])
        ]
        if cached is not None and len(cached) == len(params):
            return cached, True
        index: dict[int, tuple[int, str]] = {}
        used: set[str] = set()
        for root_number, ref in enumerate(self._roots):
            root = ref()
            if root is None:
                continue
            for name, param in root.named_parameters():
                if id(param) in index:
                    continue
                unique = name if name not in used else f"model{root_number}.{name}"
                used.add(unique)
                index[id(param)] = (len(index), unique)
        named = sorted(
            (index[id(p)] + (p,) for _, p in params if id(p) in index), key=lambda t: t[0]
        )
        result = [(name, param) for _, name, param in named]
        result += [(fallback, p) for fallback, p in params if id(p) not in index]
        complete = len(named) == len(params)
        if complete:
            self._names[optimizer] = result
        return result, complete

    # ----- loss ----------------------------------------------------------------------------

    def _wrap_backward(self, torch: Any) -> None:
        tensor_backward = torch.Tensor.backward
        autograd_backward = torch.autograd.backward
        probe = self

        def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
            probe._note_loss(self)
            return tensor_backward(self, *args, **kwargs)

        def autograd_backward_wrapper(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(tensors, (list, tuple)):
                probe._note_loss(tensors[0] if len(tensors) == 1 else None)
            else:
                probe._note_loss(tensors)
            return autograd_backward(tensors, *args, **kwargs)

        backward.__doc__ = tensor_backward.__doc__
        autograd_backward_wrapper.__doc__ = autograd_backward.__doc__
        torch.Tensor.backward = backward
        torch.autograd.backward = autograd_backward_wrapper

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
        if record is not None and self._differs_from_reference(record):
            self._stop("divergence")
        if self.max_steps is not None and self.steps >= self.max_steps:
            self._stop("max_steps")
        self.last_step_end = time.perf_counter()

    def _record_step(self, optimizer: Any) -> dict[str, Any]:
        from _repro_gate_digest import digest_tensors

        elapsed = time.perf_counter() - self.last_step_end
        named, complete = self._named_parameters(optimizer)
        self._watch_forward(not complete)
        digests = digest_tensors([param for _, param in named])
        self.steps += 1
        record = {
            "step": self.steps,
            "time": elapsed,
            "loss": self._loss_bits(),
            "params": {name: digests[i] for i, (name, _) in enumerate(named)},
        }
        if self._trajectory is None:
            path = os.path.join(self.out_dir, TRAJECTORY_FILE)
            self._trajectory = open(path, "w", encoding="utf-8")  # noqa: SIM115 (kept open)
        self._trajectory.write(json.dumps(record) + "\n")
        self._trajectory.flush()
        return record

    def _differs_from_reference(self, record: dict[str, Any]) -> bool:
        if self.reference_path is None:
            return False
        if self._reference is None:
            self._reference = self._load_reference(self.reference_path)
        expected = self._reference.get(record["step"])
        if expected is None:
            return False
        return expected.get("params") != record["params"] or expected.get("loss") != record["loss"]

    def _load_reference(self, path: str) -> dict[int, dict[str, Any]]:
        steps: dict[int, dict[str, Any]] = {}
        try:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        break  # a partial last line of a killed run
                    steps[int(entry["step"])] = entry
        except (OSError, KeyError, TypeError, ValueError) as error:
            self._error(f"reading the reference trajectory: {error!r}")
        return steps

    def _stop(self, reason: str) -> None:
        self.stopped = reason
        self.stop_step = self.steps
        self.finish()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(STOP_EXIT_CODE)

    # ----- alerts --------------------------------------------------------------------------

    def _wrap_showwarnmsg(self) -> None:
        original = warnings._showwarnmsg  # type: ignore[attr-defined]
        original_impl = warnings._showwarnmsg_impl  # type: ignore[attr-defined]
        probe = self

        def _showwarnmsg(message: warnings.WarningMessage) -> None:
            show = True
            try:
                show = probe._on_warning(message, sys._getframe(1))
            except Exception as error:
                probe._error(f"recording a warning: {error!r}")
            # While someone records warnings (catch_warnings(record=True)) they get every one.
            if show or warnings._showwarnmsg_impl is not original_impl:  # type: ignore[attr-defined]
                original(message)

        warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]

    def _on_warning(self, message: warnings.WarningMessage, frame: Any) -> bool:
        """Record one warning; False when it repeats a site already shown to the user."""
        from _repro_gate_alerts import classify_warning, first_line

        if not self._is_recording():
            return True
        text = str(message.message)
        found = classify_warning(text)
        if found is None:
            return True
        op, kind = found
        site = self._user_frames.innermost_in_stack(frame)
        file, line = site if site is not None else (message.filename, message.lineno)
        self._count_alert(op, file, line, kind, first_line(text))
        shown_key = (op, file, line)
        if shown_key in self._shown_alert_sites:
            return False
        self._shown_alert_sites.add(shown_key)
        return True

    def _count_alert(self, op: str, file: str, line: int, kind: str, message: str) -> None:
        from _repro_gate_alerts import Alert

        key = (op, file, line, kind)
        alert = self.alerts.get(key)
        if alert is None:
            alert = self.alerts[key] = Alert(op, file, line, kind, message)
        alert.count += 1

    def _on_uncaught(self, error: BaseException | None, tb: Any, finish: bool) -> None:
        from _repro_gate_alerts import KIND_STRICT, classify_error, first_line

        if not self._is_recording() or self._user_frames is None:
            return
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            op = classify_error(error)
            if op is not None:
                site = self._user_frames.innermost_in_traceback(error.__traceback__ or tb)
                file, line = site if site is not None else ("", 0)
                self._count_alert(op, file, line, KIND_STRICT, first_line(str(error)))
                break
            error = error.__cause__ or error.__context__
        if finish:
            self.finish()

    def _chain_excepthooks(self) -> None:
        previous_hook = sys.excepthook
        previous_thread_hook = threading.excepthook
        probe = self

        def excepthook(kind: Any, error: Any, tb: Any) -> None:
            try:
                probe._on_uncaught(error, tb, finish=True)
            except Exception as failure:
                probe._error(f"recording an uncaught exception: {failure!r}")
            previous_hook(kind, error, tb)

        def thread_excepthook(args: Any) -> None:
            try:
                probe._on_uncaught(args.exc_value, args.exc_traceback, finish=False)
            except Exception as failure:
                probe._error(f"recording an uncaught exception: {failure!r}")
            previous_thread_hook(args)

        sys.excepthook = excepthook
        threading.excepthook = thread_excepthook

    # ----- finishing -----------------------------------------------------------------------

    def finish(self) -> None:
        """Write alerts, fingerprint and status; safe to call more than once."""
        if not self._is_recording():
            return
        try:
            if self._trajectory is not None:
                self._trajectory.flush()
            alerts = [alert.as_json() for alert in self.alerts.values()]
            alerts.sort(key=lambda a: (a["file"], a["line"], a["op"], a["kind"]))
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
