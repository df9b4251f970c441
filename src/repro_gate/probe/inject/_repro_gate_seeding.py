"""Who seeded what, and who set each determinism setting: the training, or the gate.

The gate seeds nothing unless it was given a seed (REPRO_GATE_SEED). Whatever happens, the
training's own seeding calls are watched: `random.seed`, `numpy.random.seed`, a seeded
`numpy.random.default_rng`, `torch.manual_seed`, `torch.cuda.manual_seed(_all)` (Lightning's
`seed_everything` and transformers' `set_seed` end in these). Each is wrapped at module level,
calls through unchanged and returns what it returned; the call site is the first frame outside
torch, numpy and the probe. `torch.Generator` is an immutable C type whose `manual_seed` cannot
be wrapped: its seeding is not recorded (a DataLoader's `generator` is, by
_repro_gate_fingerprint). The first parameter's creation is seen through torch's global
parameter registration hook (never a hook on the user's objects); it stays registered, returning
at once after the first parameter (removing it while torch iterates its hooks would break a
training that registered one of its own). The determinism settings the gate applies are watched
the same way (`torch.use_deterministic_algorithms`, the cuDNN flags' setters); for the variables
the gate sets, REPRO_GATE_USER_ENV tells what the user's environment had before.

Standard library only; torch and numpy are handed in once the training imported them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from _repro_gate_contract import ENV_USER_ENV
from _repro_gate_hook_ids import probe_hook_ids

MAX_CALLS = 50  # distinct seeding call sites kept
_PROBE_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep
# The settings the gate applies in a deterministic run, by the names of the manifest.
SETTINGS = ("use_deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark",
            "CUBLAS_WORKSPACE_CONFIG")
# PYTHONHASHSEED is not one: each run gets its own, observed (the run's `hash_seed`), never
# a setting to reproduce.
ENV_SETTINGS = ("CUBLAS_WORKSPACE_CONFIG",)
# Which generator each call seeds: the torch and numpy globals, random's, or a new generator.
GENERATORS = {
    "random.seed": "random",
    "numpy.random.seed": "numpy",
    "numpy.random.default_rng": "numpy.default_rng",
    "torch.manual_seed": "torch",
    "torch.cuda.manual_seed": "torch.cuda",
    "torch.cuda.manual_seed_all": "torch.cuda",
}


class Seeding:
    """What the training seeded and set in this process, and what the gate supplied."""

    def __init__(self, gate_seed: int | None, on_error: Callable[[str], None]) -> None:
        self.gate_seed = gate_seed
        self._on_error = on_error
        self._calls: dict[tuple[str, str, int], dict[str, Any]] = {}
        self._set_by_training: set[str] = set()
        self._gate_applied: set[str] = set()
        self.first_parameter: dict[str, Any] | None = None
        self._local = threading.local()  # depth of wrapped calls: inner ones are not the user's
        self._lock = threading.Lock()
        self._user_env = _read_user_env(on_error)

    # ----- what the gate applies --------------------------------------------------------

    def seed_random(self, random: Any) -> None:
        if self.gate_seed is not None:
            random.seed(self.gate_seed)

    def seed_numpy(self, numpy: Any) -> None:
        if self.gate_seed is not None:
            numpy.random.seed(self.gate_seed % 2**32)

    def seed_torch(self, torch: Any) -> None:
        if self.gate_seed is not None:
            torch.manual_seed(self.gate_seed)

    def on_torch_imported(self, torch: Any, deterministic: bool, strict: bool) -> None:
        """In a deterministic run, the gate's seed (if any) and determinism settings; in every
        run, the watch on the training's own seeding and settings from here on."""
        if deterministic:
            try:
                self.seed_torch(torch)
                torch.use_deterministic_algorithms(True, warn_only=not strict)
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
                self._gate_applied.update(("use_deterministic_algorithms", "cudnn_deterministic",
                                           "cudnn_benchmark"))
            except Exception as error:
                self._on_error(f"deterministic setup: {error!r}")
        try:
            self.watch_torch(torch)
        except Exception as error:
            self._on_error(f"watching torch's seeding: {error!r}")

    # ----- watching the training --------------------------------------------------------

    def watch_random(self, random: Any) -> None:
        self._wrap(random, "seed", "random.seed")

    def watch_numpy(self, numpy: Any) -> None:
        self._wrap(numpy.random, "seed", "numpy.random.seed")
        self._wrap(numpy.random, "default_rng", "numpy.random.default_rng")

    def watch_torch(self, torch: Any) -> None:
        seed = self._wrapper(torch.manual_seed, "torch.manual_seed")
        for owner in (torch, torch.random):
            if getattr(owner, "manual_seed", None) is getattr(seed, "__wrapped__", None):
                owner.manual_seed = seed
        self._wrap(torch.cuda, "manual_seed", "torch.cuda.manual_seed")
        self._wrap(torch.cuda, "manual_seed_all", "torch.cuda.manual_seed_all")
        self._wrap(torch, "use_deterministic_algorithms", "use_deterministic_algorithms")
        cudnn_type = type(torch.backends.cudnn)
        for name in ("deterministic", "benchmark"):
            self._watch_property(vars(cudnn_type).get(name), f"cudnn_{name}")
        registration = torch.nn.modules.module.register_module_parameter_registration_hook
        with probe_hook_ids():  # the training's own hooks keep their numbers
            registration(self._on_parameter)

    def _wrap(self, owner: Any, name: str, call: str) -> None:
        original = getattr(owner, name, None)
        if callable(original):
            setattr(owner, name, self._wrapper(original, call))

    def _wrapper(self, original: Callable[..., Any], call: str) -> Callable[..., Any]:
        def observed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            try:
                return original(*args, **kwargs)
            finally:
                self._local.depth = depth
                if depth == 0:
                    self._note(call, args, kwargs)

        observed.__wrapped__ = original  # type: ignore[attr-defined]
        for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
            try:
                setattr(observed, attribute, getattr(original, attribute))
            except (AttributeError, TypeError):
                continue
        return observed

    def _watch_property(self, prop: Any, setting: str) -> None:
        original = getattr(prop, "setter", None)
        if not callable(original):
            return

        def observed(value: Any) -> Any:
            result = original(value)
            self._note(setting, (value,), {})
            return result

        observed.__wrapped__ = original  # type: ignore[attr-defined]
        prop.setter = observed

    def _note(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            where = _caller()
            if where is None:  # the probe's own call (the cost run's arms)
                return
            if call in SETTINGS:
                self._set_by_training.add(call)
                return
            seed = args[0] if args else kwargs.get("seed")
            if call == "numpy.random.default_rng" and seed is None:
                return  # an unseeded generator: nothing was seeded
            file, line = where
            key = (call, file, line)
            with self._lock:
                if key in self._calls:
                    self._calls[key]["count"] += 1
                elif len(self._calls) < MAX_CALLS:
                    self._calls[key] = {
                        "generator": GENERATORS[call],
                        "call": call,
                        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool)
                        else None,
                        "file": file,
                        "line": line,
                        "before_parameters": self.first_parameter is None,
                        "count": 1,
                    }
        except Exception as error:
            self._on_error(f"recording a seeding call: {error!r}")

    def _on_parameter(self, module: Any, name: str, param: Any) -> None:
        if self.first_parameter is not None:
            return
        try:
            where = _caller()
            file, line = where if where is not None else (None, None)
            self.first_parameter = {
                "file": file,
                "line": line,
                "module": type(module).__name__,
                "torch_seeded_before": self.gate_seed is not None or any(
                    c["generator"] == "torch" for c in self._calls.values()),
            }
        except Exception as error:
            self._on_error(f"recording the first parameter: {error!r}")

    # ----- the record -------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        """The `seeding` entry of the in-process fingerprint's `random` section."""
        settings = {name: {"gate": name in self._gate_applied,
                           "training": name in self._set_by_training}
                    for name in SETTINGS}
        for name in ENV_SETTINGS:
            gate_value = (self._user_env or {}).get(f"gate:{name}")
            settings[name]["gate"] = gate_value is not None and os.environ.get(name) == gate_value
            settings[name]["training"] = self._env_set_by_user(name)
        with self._lock:
            calls = [dict(call) for call in self._calls.values()]
        imported = {"numpy": "numpy" in sys.modules, "torch": "torch" in sys.modules}
        return {"gate_seed": self.gate_seed, "calls": calls,
                "first_parameter": self.first_parameter, "settings": settings,
                "imported": imported}

    def _env_set_by_user(self, name: str) -> bool:
        """True when the variable came from the user's environment (before the gate set it),
        or the training changed it."""
        if self._user_env is None:
            return False
        if self._user_env.get(name) is not None:
            return True
        gate_value = self._user_env.get(f"gate:{name}")
        return gate_value is not None and os.environ.get(name) != gate_value


def _read_user_env(on_error: Callable[[str], None]) -> dict[str, Any] | None:
    raw = os.environ.get(ENV_USER_ENV)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        on_error(f"{ENV_USER_ENV} is not JSON")
        return None
    return value if isinstance(value, dict) else None


def _caller() -> tuple[str, int] | None:
    """File and line of the call into the watched function: the first frame outside torch,
    numpy and the probe, preferring one outside installed packages. None when the probe itself
    made the call."""
    skipped = _library_dirs()
    this_file = os.path.abspath(__file__)
    fallback: tuple[str, int] | None = None
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith(_PROBE_DIR) and filename != this_file:
            return None if fallback is None else fallback
        if filename != this_file and not filename.startswith(skipped):
            if not _is_library(filename):
                return _relative(filename), frame.f_lineno
            fallback = fallback or (_relative(filename), frame.f_lineno)
        frame = frame.f_back
    # Called by a library (Lightning's seed_everything, ...) with no user frame above it.
    return fallback


def _is_library(filename: str) -> bool:
    parts = filename.replace(os.sep, "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


def _library_dirs() -> tuple[str, ...]:
    dirs = []
    for name in ("torch", "numpy"):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            dirs.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(dirs) or ("\0",)


def _relative(filename: str) -> str:
    cwd = os.getcwd()
    if filename.startswith(cwd + os.sep):
        return os.path.relpath(filename, cwd).replace(os.sep, "/")
    return filename
