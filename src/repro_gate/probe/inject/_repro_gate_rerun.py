"""Running a module call a second time from the state it started in (the localisation run).

Before a call runs, `saved_inputs` clones its arguments, `capture_rng` saves the random states
and `ModuleState` the module tree's attributes (one level deep), parameters, submodules and
clones of its buffers. After it, `run_again` executes the module's `forward` on the clones from
that state, then puts back what the call left: the same objects, untouched (an in-place restore
would disturb tensors that autograd saved for the backward). The probe's and the user's global
module hooks do not see the second execution. Restoring the random states the call left is the
caller's part (`capture_rng` after the call, `restore_rng` after `run_again`).
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_NESTING = 6  # how deep lists, tuples and dicts of tensors are searched
# The attributes holding a module's parameters, buffers and submodules (restored by content).
MODULE_TABLES = ("_parameters", "_buffers", "_modules")
GLOBAL_FORWARD_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks")


class Saved:
    """A clone of an input tensor, and whether the original required grad."""

    __slots__ = ("requires_grad", "tensor")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor.detach().clone()
        self.requires_grad = bool(tensor.requires_grad)


class ModuleState:
    """What a module tree holds when a call starts: per module, its attributes (one level deep),
    and its parameters, buffers (cloned) and submodules."""

    def __init__(self, module: Any) -> None:
        self.members = [_holdings(member, clone_buffers=True) for member in module.modules()]

    def copy(self) -> ModuleState:
        """The same start with its buffers cloned again, for one more execution (an execution
        may change the buffers it was given in place)."""
        state = ModuleState.__new__(ModuleState)
        state.members = [
            (member, dict(attributes), {**tables, "_buffers": {
                name: None if buffer is None else buffer.clone()
                for name, buffer in tables["_buffers"].items()}})
            for member, attributes, tables in self.members
        ]
        return state

    def now(self) -> list[tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]]:
        """The same modules' holdings as they are now (the objects, nothing cloned)."""
        return [_holdings(member, clone_buffers=False) for member, _, _ in self.members]


def run_again(
    torch: Any, module: Any, args: Any, kwargs: Any, rng: tuple[Any, ...], start: ModuleState
) -> Any:
    """`module.forward` on saved `args` and `kwargs` (from `saved_inputs`), from random states
    `rng` and module state `start`. Grad mode stays as the caller has it (on, as in the call:
    some modules pick other kernels without it); identity saved-tensor hooks keep an enclosing
    activation checkpoint's hooks out of it. `start` is used up (`ModuleState.copy` gives
    another); the saved inputs are not. The output is the caller's to digest before anything
    else runs."""
    args, kwargs = _fresh(args), _fresh(kwargs)
    after = start.now()
    restore_rng(torch, rng)
    _install(start.members)
    try:
        with _global_forward_hooks_suspended(), \
                torch.autograd.graph.saved_tensors_hooks(_same, _same):
            return module.forward(*args, **kwargs)
    finally:
        _install(after)


def saved_inputs(torch: Any, value: Any, depth: int = 0) -> Any:
    """`value` with every tensor in plain lists, tuples and dicts replaced by a `Saved`."""
    if isinstance(value, torch.Tensor):
        return Saved(value)
    if depth >= MAX_NESTING:
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(saved_inputs(torch, item, depth + 1) for item in value))
    if type(value) in (list, tuple):
        return type(value)(saved_inputs(torch, item, depth + 1) for item in value)
    if type(value) is dict:
        return {key: saved_inputs(torch, item, depth + 1) for key, item in value.items()}
    return value


def tensors_in(torch: Any, value: Any, depth: int = 0) -> list[Any]:
    """The tensors in `value`, searched through lists, tuples and mappings, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth >= MAX_NESTING:
        return []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(torch, item, depth + 1)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(torch, item, depth + 1)]
    return []


def same_tensors(torch: Any, first: Any, second: Any) -> bool:
    """Whether two argument lists hold the same tensors (a backward hook's alias counts)."""
    ours, theirs = tensors_in(torch, first), tensors_in(torch, second)
    return len(ours) == len(theirs) and all(
        _identity(a) == _identity(b) for a, b in zip(ours, theirs, strict=True)
    )


def capture_rng(torch: Any) -> tuple[Any, ...]:
    """The global random states: torch's CPU and CUDA generators, `random`'s, numpy's."""
    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return (
        torch.get_rng_state(),
        cuda,
        random.getstate(),
        numpy_random.get_state() if numpy_random is not None else None,
    )


def restore_rng(torch: Any, state: tuple[Any, ...]) -> None:
    cpu, cuda, python, numpy_state = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    random.setstate(python)
    if numpy_state is not None:
        sys.modules["numpy"].random.set_state(numpy_state)


def _identity(tensor: Any) -> tuple[Any, ...]:
    return (tensor.data_ptr(), tuple(tensor.shape), tensor.dtype)


def _same(tensor: Any) -> Any:
    return tensor


def _fresh(value: Any) -> Any:
    """The inputs for one more execution: a clone of each `Saved` (the execution may change it
    in place); one that required grad does again, as a non-leaf (a leaf that requires grad
    refuses the in-place ops the call may do)."""
    if isinstance(value, Saved):
        return value.tensor.requires_grad_().clone() if value.requires_grad \
            else value.tensor.clone()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_fresh(item) for item in value))
    if type(value) in (list, tuple):
        return type(value)(_fresh(item) for item in value)
    if type(value) is dict:
        return {key: _fresh(item) for key, item in value.items()}
    return value


def _holdings(
    member: Any, clone_buffers: bool
) -> tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]:
    tables = {name: dict(getattr(member, name)) for name in MODULE_TABLES}
    if clone_buffers:
        tables["_buffers"] = {
            name: None if buffer is None else buffer.detach().clone()
            for name, buffer in tables["_buffers"].items()
        }
    return member, dict(member.__dict__), tables


def _install(members: list[tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]]) -> None:
    """Give each module these attributes, and these entries in its tables (the tables stay
    the same dict objects)."""
    for member, attributes, tables in members:
        state = member.__dict__
        for key in [key for key in state if key not in attributes]:
            del state[key]
        for key, value in attributes.items():
            if state.get(key) is not value:
                state[key] = value
        for name, entries in tables.items():
            table = getattr(member, name)
            table.clear()
            table.update(entries)


@contextmanager
def _global_forward_hooks_suspended() -> Iterator[None]:
    """Global forward hooks (the probe's, the user's) do not see the second execution."""
    hooks = importlib.import_module("torch.nn.modules.module")
    found = [getattr(hooks, name, None) for name in GLOBAL_FORWARD_HOOKS]
    tables = [table for table in found if isinstance(table, dict)]
    saved = [dict(table) for table in tables]
    for table in tables:
        table.clear()
    try:
        yield
    finally:
        for table, entries in zip(tables, saved, strict=True):
            added = dict(table)  # registered during the execution: kept, after the others
            table.clear()
            table.update(entries)
            table.update(added)
