"""Model names for an optimizer's parameters, learnt from the root modules seen in forward calls.

Module calls are seen through torch's global module hooks only: nothing is registered on, added
to or wrapped around the user's modules, so what `pickle`, `torch.save(model)`, `copy.deepcopy`,
`state_dict()` and a module's own hook tables see is what they see without the probe. The roots
are held by weak references, and the hooks' handles are numbered apart from the training's
(`_repro_gate_hook_ids`).
"""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

from _repro_gate_hook_ids import probe_hook_ids

RootCall = Callable[[Any, Any, Any, Any], None]


class ParameterNames:
    """Names parameters as their model does (`layer.weight`), in model order."""

    def __init__(self, on_root_call: RootCall | None = None) -> None:
        # (module, args, kwargs, output) each time a root's call ends (not when it raised)
        self._on_root_call = on_root_call
        self.on_root_start: Callable[[Any], None] | None = None  # (module) as a root call begins
        self._noting = False  # roots are noted until every optimizer's names are known
        self._roots: list[weakref.ref[Any]] = []
        self._root_ids: set[int] = set()
        self._forward_state = threading.local()
        self._forward_hooks: list[Any] = []
        self._names: weakref.WeakKeyDictionary[Any, list[tuple[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )

    def watch_forward(self, on: bool) -> None:
        """Note root modules while on. The global hooks stay as long as a root-call observer
        needs them (every step's calls); without one they go once every optimizer's names are
        known."""
        self._noting = on
        if not self._forward_hooks and (on or self._on_root_call is not None):
            hooks = importlib.import_module("torch.nn.modules.module")
            with probe_hook_ids():
                self._forward_hooks = [
                    hooks.register_module_forward_pre_hook(self._on_forward_pre),
                    hooks.register_module_forward_hook(
                        self._on_forward_post, with_kwargs=True, always_call=True
                    ),
                ]
        elif not on and self._on_root_call is None:
            for handle in self._forward_hooks:
                handle.remove()
            self._forward_hooks = []

    def _on_forward_pre(self, module: Any, args: Any) -> None:
        state = self._forward_state
        depth = getattr(state, "depth", 0)
        state.depth = depth + 1
        if depth == 0 and self.on_root_start is not None:
            self.on_root_start(module)
        if depth == 0 and self._noting and id(module) not in self._root_ids:
            self._roots = [ref for ref in self._roots if ref() is not None]
            self._root_ids = {id(ref()) for ref in self._roots}
            if id(module) not in self._root_ids:
                self._roots.append(weakref.ref(module))
                self._root_ids.add(id(module))

    def _on_forward_post(self, module: Any, args: Any, *kwargs_and_output: Any) -> None:
        # (kwargs, output) after a call; only (output) when the forward raised (always_call).
        depth = max(0, getattr(self._forward_state, "depth", 1) - 1)
        self._forward_state.depth = depth
        if depth == 0 and len(kwargs_and_output) == 2 and self._on_root_call is not None:
            self._on_root_call(module, args, *kwargs_and_output)

    def named_parameters(self, optimizer: Any) -> tuple[list[tuple[str, Any]], bool]:
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
