"""The localisation run: the first module whose forward is not reproducible at the divergent step.

The gate starts this run only after it failed with a divergence in the forward pass at step k
(REPRO_GATE_LOCALISE_STEP=k; the probe stops the run after step k). Once k-1 optimizer steps are
done, every module call made under grad mode is checked: before it runs, its inputs are cloned
and the random states saved; after it, its output is digested, its `forward` runs again on the
clones from the same random states, buffers and attributes, and that output is digested too
(up to REPLAYS times, until one differs). A
module that answers the same inputs and state with another output is where the forward pass
stops being reproducible (entropy it reads, a nondeterministic kernel). The first such module in
completion order, so the innermost, goes into localise.json (rank N > 0: localise-rankN.json):

    {"step": k, "module": "body.1" | null, "class": "Noisy" | null, "checked": 12, "errors": []}

`module` is its name in the outermost module called (inside a DDP/FSDP wrapper's `.module`; ""
for that module itself); null when every module reproduced its output, so the difference comes
from code outside any module (a loss computed in the training loop, say). The training itself
sees the state it would have seen: the random states are set back to where the call left them,
and `_repro_gate_rerun` (the second execution) puts buffers and attributes back and keeps the
probe's and the user's global module hooks out of it. Checking goes on after a hit, so that
every rank runs the same module calls (a module may talk to the other ranks).

Limits: keyword arguments are cloned after the call (global pre-hooks do not receive them), so a
module that changes a keyword tensor in place is not checked faithfully; random generators other
than the global ones (torch, CUDA, `random`, numpy) are not replayed; attributes are restored one
level deep (a cache list the forward appends to keeps the second append); modules that contain a
DDP/FSDP wrapper, and modules whose own pre-hooks replaced their inputs, are not checked.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

from _repro_gate_contract import ENV_LOCALISE_STEP, LOCALISE_FILE, rank_file
from _repro_gate_files import int_env, write_json
from _repro_gate_hook_ids import probe_hook_ids
from _repro_gate_ranks import rank_and_world_size
from _repro_gate_rerun import (
    ModuleState,
    capture_rng,
    restore_rng,
    run_again,
    same_tensors,
    saved_inputs,
    tensors_in,
)

MAX_ERRORS = 20
# A nondeterministic module need not answer differently every time (a tiny random term can round
# away, an atomic may land in the same order): each call is run again up to this many times, so
# that its container is not named in its place.
REPLAYS = 3
# Wrappers whose forward talks to the other ranks or prepares their backward: never run twice.
WRAPPERS = frozenset(
    {"DistributedDataParallel", "FullyShardedDataParallel", "FSDPModule", "DataParallel"}
)
# Name segments that wrappers add; the user's model does not have them.
WRAPPER_SEGMENTS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})


def install(torch: Any, out_dir: str, on_error: Callable[[str], None]) -> None:
    """Check the module calls of step REPRO_GATE_LOCALISE_STEP of this process."""
    step = int_env(ENV_LOCALISE_STEP, None, on_error)
    if step is None or step < 1:
        on_error(f"{ENV_LOCALISE_STEP} must be a step number (1 or more): no localisation")
        return
    try:
        Localiser(torch, out_dir, step, on_error).start()
    except Exception as error:
        on_error(f"starting the localisation: {error!r}")


class _Call:
    """One module call in progress; `inputs` is None when the call is not checked."""

    __slots__ = ("args", "inputs", "module", "rng", "start")

    def __init__(self, module: Any, args: Any = None, inputs: Any = None, rng: Any = None,
                 start: ModuleState | None = None) -> None:
        self.module = module
        self.args = args  # the call's own argument tuple: its pre-hooks may replace it
        self.inputs = inputs
        self.rng = rng
        self.start = start


class Localiser:
    """Counts optimizer steps; during step `step`, runs every module call twice and compares."""

    def __init__(self, torch: Any, out_dir: str, step: int, on_error: Callable[[str], None]):
        self._torch = torch
        self._out_dir = out_dir
        self._step = step
        self._on_error = on_error
        self._steps = 0
        self._handles: list[Any] = []
        self._local = threading.local()  # per thread: the stack of calls, and `busy`
        self._lock = threading.Lock()
        self._found: tuple[str, str] | None = None  # (name, class) of the first divergent module
        self._checked = 0
        self._errors: list[str] = []
        self._wrapped: dict[int, bool] = {}  # id(module) -> contains a DDP/FSDP wrapper
        self._in_worker: bool | None = None  # a DataLoader worker never checks

    def start(self) -> None:
        optimizers = importlib.import_module("torch.optim.optimizer")
        with probe_hook_ids():
            optimizers.register_optimizer_step_post_hook(self._on_step)
        os.register_at_fork(after_in_child=self._after_fork)
        if self._step == 1:
            self._arm()

    def _after_fork(self) -> None:
        self._local = threading.local()
        self._in_worker = None

    # ----- steps ---------------------------------------------------------------------------

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._steps += 1
        if self._steps == self._step - 1:
            self._arm()
        elif self._steps == self._step:  # reached only when the probe did not stop the run
            self._disarm()
            self._write()

    def _arm(self) -> None:
        try:
            hooks = importlib.import_module("torch.nn.modules.module")
            with probe_hook_ids():
                self._handles = [
                    hooks.register_module_forward_pre_hook(self._before_call),
                    hooks.register_module_forward_hook(self._after_call, with_kwargs=True),
                ]
        except Exception as error:
            self._on_error(f"localisation hooks: {error!r}")
            self._disarm()

    def _disarm(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    # ----- module calls --------------------------------------------------------------------

    def _stack(self) -> list[_Call]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _before_call(self, module: Any, args: Any) -> None:
        if getattr(self._local, "busy", False):
            return
        try:
            if self._in_worker is None:
                self._in_worker = _in_dataloader_worker(self._torch)
            if self._in_worker:
                self._disarm()
                return
            call = _Call(module)
            # Evaluation calls are not the training's forward; a wrapper is never run twice.
            if self._torch.is_grad_enabled() and not self._contains_wrapper(module):
                inputs = saved_inputs(self._torch, args)
                call = _Call(module, args, inputs, capture_rng(self._torch), ModuleState(module))
            self._stack().append(call)
        except Exception as error:
            self._note(f"{type(module).__name__}: inputs not saved: {error!r}")

    def _after_call(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        if getattr(self._local, "busy", False):
            return
        stack = self._stack()
        call = _pop(stack, module)
        if call is None:
            return
        root = stack[0].module if stack else module
        try:
            if call.start is not None:  # a checked call
                self._check(call, call.start, root, args, kwargs, output)
        except Exception as error:
            self._note(f"{self._describe(root, module)}: not checked: {error!r}")
        if not stack:  # an outermost call ended: what is known so far is written
            self._write()

    def _check(self, call: _Call, start: ModuleState, root: Any, args: Any, kwargs: Any,
               output: Any) -> None:
        from _repro_gate_digest import digest_tensors

        torch = self._torch
        if args is not call.args and not same_tensors(torch, args, call.args):
            self._note(f"{self._describe(root, call.module)}: not checked: its own forward "
                       "pre-hooks replaced its inputs")
            return
        outputs = tensors_in(torch, output)
        if not outputs:
            return
        expected = digest_tensors(outputs)
        kwargs_saved = saved_inputs(torch, kwargs)
        after = capture_rng(torch)
        self._local.busy = True  # these hooks too stay out of the second execution
        try:
            changed = any(self._replay_differs(call, start, kwargs_saved, expected)
                          for _ in range(REPLAYS))
        finally:
            self._local.busy = False
            restore_rng(torch, after)
        with self._lock:
            self._checked += 1
            if changed and self._found is None:
                self._found = (self._name(root, call.module), type(call.module).__name__)

    def _replay_differs(self, call: _Call, start: ModuleState, kwargs_saved: Any,
                        expected: list[str]) -> bool:
        from _repro_gate_digest import digest_tensors

        torch = self._torch
        again = run_again(torch, call.module, call.inputs, kwargs_saved, call.rng, start.copy())
        return digest_tensors(tensors_in(torch, again)) != expected

    # ----- names and results ---------------------------------------------------------------

    def _contains_wrapper(self, module: Any) -> bool:
        known = self._wrapped.get(id(module))
        if known is None:
            known = self._wrapped[id(module)] = any(_is_wrapper(m) for m in module.modules())
        return known

    def _name(self, root: Any, module: Any) -> str:
        """`module`'s name in the root (inside a wrapper root's `.module`); "" for the root."""
        inner = getattr(root, "module", None) if _is_wrapper(root) else None
        named = inner if isinstance(inner, self._torch.nn.Module) else root
        for name, candidate in named.named_modules():
            if candidate is module:
                return ".".join(p for p in name.split(".") if p not in WRAPPER_SEGMENTS)
        return ""

    def _describe(self, root: Any, module: Any) -> str:
        try:
            name = self._name(root, module)
        except Exception:
            name = ""
        return f"{name or '(root)'} ({type(module).__name__})"

    def _note(self, text: str) -> None:
        with self._lock:
            if len(self._errors) < MAX_ERRORS and text not in self._errors:
                self._errors.append(text)

    def _write(self) -> None:
        if not self._checked and not self._errors:
            return
        name, kind = self._found or (None, None)
        result = {"step": self._step, "module": name, "class": kind,
                  "checked": self._checked, "errors": list(self._errors)}
        try:
            rank, _ = rank_and_world_size(self._torch, self._on_error)
            os.makedirs(self._out_dir, exist_ok=True)
            write_json(os.path.join(self._out_dir, rank_file(LOCALISE_FILE, rank)), result)
        except Exception as error:
            self._on_error(f"writing {LOCALISE_FILE}: {error!r}")


# ----- helpers -------------------------------------------------------------------------------


def _pop(stack: list[_Call], module: Any) -> _Call | None:
    """The call of `module` on the stack, with every call above it (they raised) removed."""
    for index in range(len(stack) - 1, -1, -1):
        if stack[index].module is module:
            call = stack[index]
            del stack[index:]
            return call
    return None


def _is_wrapper(module: Any) -> bool:
    return any(cls.__name__ in WRAPPERS for cls in type(module).__mro__)


def _in_dataloader_worker(torch: Any) -> bool:
    data = getattr(getattr(torch, "utils", None), "data", None)
    worker_info = getattr(data, "get_worker_info", None)
    return worker_info is not None and worker_info() is not None
