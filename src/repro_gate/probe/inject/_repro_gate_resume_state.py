"""The state each optimizer step begins with, recorded for the resume check (RESUME_STATE_FILE).

Only with REPRO_GATE_RESUME_RECORDS=1 (runs A and R when `resume` is set): nothing here is
imported otherwise. One JSON line per step n, so that the gate can tell which state a resumed
process did not restore, by comparing R's lines after its resume point with A's at the same steps:

    {"step": n, "params": hex, "buffers": hex | null,
     "rng": {"torch": hex, "cuda": hex | null, "numpy": hex | null, "random": hex},
     "optimizer_state": hex | null, "hyper": [{"lr": x, "betas": [b1, b2], ...}, ...],
     "grad_scale": x | null}

`params`, `buffers` and `rng` are taken as step n begins: at the first training call of the
model (a root module with parameters, in grad mode) after optimizer step n - 1 (for the first
step, its first), seen through the probe's global forward pre-hook, so after the data loader
drew the step's batch and, in a resumed process, after the training restored its checkpoint. The
parameters and buffers are those of that module, digested as the probe digests parameters (on
the host, tensors of SAMPLE_MIN_ELEMENTS or more one block in SAMPLE_EVERY, the block of step n);
the generators' states are sha256 digests (16 hex digits) of their bytes: torch's CPU generator,
every CUDA generator once CUDA is initialised, numpy's global generator once numpy is imported,
and `random`'s. `optimizer_state` (the state tensors in the optimizer's parameter order, sampled
the same way, with its other values; null while it has none), `hyper` (each parameter group's
scalar hyperparameters: numbers and tuples of numbers, flags left out) and `grad_scale` (the
scale of the torch.amp GradScaler that scaled a loss last, when it is enabled; else null) are
taken at optimizer step n's pre-hook, before the update: they do not change between the step's
beginning and its update, and the scale is the one the step's loss was scaled with. The line is
written at the step's post-hook; a process stopped at a step's pre-hook writes none for it.

On an accelerator, reading the digests back waits for the device at each step's post-hook.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import random
import sys
import weakref
from collections.abc import Callable
from typing import Any, TextIO

import torch
from _repro_gate_contract import RESUME_STATE_FILE, rank_file
from _repro_gate_digest import (
    PendingDigests,
    Sample,
    combine_digests,
    finish_digests,
    start_digests,
)
from _repro_gate_steps import SAMPLE_EVERY, SAMPLE_MIN_ELEMENTS


class ResumeRecords:
    """Takes each step's state (`on_root_start`, `before_step`) and writes it (`after_step`)."""

    def __init__(self, out_dir: str, steps: Callable[[], int], append: bool,
                 on_error: Callable[[str], None]) -> None:
        self.out_dir = out_dir
        self._steps = steps  # the optimizer steps completed
        self._append = append  # the resumed process goes on with the run's file
        self._on_error = on_error
        self._armed = True  # until the step's first training call
        self._begin: tuple[PendingDigests, PendingDigests | None, dict[str, Any]] | None = None
        self._line: tuple[dict[str, Any], list[PendingDigests | None]] | None = None
        self._handle: TextIO | None = None
        self._scaler: weakref.ref[Any] | None = None
        _watch_grad_scalers(self._note_scaler)

    def on_root_start(self, module: Any) -> None:
        """A root module's call begins: the step's state, at its first training call."""
        if not self._armed or not torch.is_grad_enabled():
            return
        try:
            params = [param for _, param in module.named_parameters()]
            if params:
                self._armed = False
                buffers = [buffer for _, buffer in module.named_buffers()]
                self._begin = self._start(params, buffers or None, self._steps() + 1)
        except Exception as error:
            self._on_error(f"recording the state step {self._steps() + 1} began with: {error!r}")

    def before_step(self, optimizer: Any, step: int) -> None:
        """Optimizer step `step`'s pre-hook: the optimizer's state and hyperparameters."""
        try:
            begin = self._begin
            if begin is None:  # no training call seen: the optimizer's parameters, no buffers
                tensors = [p for group in optimizer.param_groups for p in group["params"]]
                begin = self._start(tensors, None, step)
            self._begin = None
            params, buffers, rng = begin
            state_tensors, others = _optimizer_state(optimizer)
            state = start_digests(state_tensors, sample=_sample(step)) if others else None
            line = {"step": step, "params": None, "buffers": None, "rng": rng,
                    "optimizer_state": _sha16(json.dumps(others, default=repr)),
                    "hyper": [_hyper(group) for group in optimizer.param_groups],
                    "grad_scale": self._grad_scale()}
            self._line = (line, [params, buffers, state])
        except Exception as error:
            self._line = None
            self._on_error(f"recording the state of step {step}: {error!r}")

    def after_step(self, rank: int) -> None:
        """Optimizer step's post-hook: write the step's line; the next call begins a step."""
        self._armed = True
        pending, self._line = self._line, None
        if pending is None:
            return
        line, (params, buffers, state) = pending
        try:
            batches = [batch for batch in (params, buffers, state) if batch is not None]
            digests = iter(finish_digests(*batches))
            named = (("params", params), ("buffers", buffers), ("optimizer_state", state))
            for key, batch in named:
                if batch is None:
                    line[key] = None
                    continue
                found = [d for d in next(digests) if d is not None]
                line[key] = combine_digests(found + ([line[key]] if line[key] else []))
            self._write(line, rank)
        except Exception as error:
            self._on_error(f"writing the state of step {line['step']}: {error!r}")

    def _start(self, params: list[Any], buffers: list[Any] | None,
               step: int) -> tuple[PendingDigests, PendingDigests | None, dict[str, Any]]:
        sample = _sample(step)
        return (start_digests(params, sample=sample),
                None if buffers is None else start_digests(buffers, sample=sample), _rng())

    def _write(self, line: dict[str, Any], rank: int) -> None:
        if self._handle is None:
            path = os.path.join(self.out_dir, rank_file(RESUME_STATE_FILE, rank))
            self._handle = open(path, "a" if self._append else "w",  # noqa: SIM115 (kept open)
                                encoding="utf-8")
        self._handle.write(json.dumps(line) + "\n")
        self._handle.flush()

    def _note_scaler(self, scaler: Any) -> None:
        self._scaler = weakref.ref(scaler)

    def _grad_scale(self) -> float | None:
        scaler = self._scaler() if self._scaler is not None else None
        if scaler is None or not scaler.is_enabled():
            return None
        return float(scaler.get_scale())


def _sample(step: int) -> Sample:
    """The block of large tensors digested at `step`: the parameters' of the trajectory."""
    return Sample(SAMPLE_EVERY, (step - 1) % SAMPLE_EVERY, SAMPLE_MIN_ELEMENTS)


def _rng() -> dict[str, str | None]:
    """Digests of the generators' states now (CUDA's once initialised, numpy's once imported)."""
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = _sha16(b"".join(_bytes(state) for state in torch.cuda.get_rng_state_all()))
    numpy = sys.modules.get("numpy")
    numpy_state = None
    if numpy is not None:
        kind, keys, position, has_gauss, gauss = numpy.random.get_state(legacy=True)
        numpy_state = _sha16(keys.tobytes() + repr((kind, position, has_gauss, gauss)).encode())
    version, internal, gauss = random.getstate()
    python = array.array("Q", internal).tobytes() + repr((version, gauss)).encode()
    return {"torch": _sha16(_bytes(torch.get_rng_state())), "cuda": cuda, "numpy": numpy_state,
            "random": _sha16(python)}


def _optimizer_state(optimizer: Any) -> tuple[list[Any], list[Any]]:
    """The optimizer's state tensors in its parameter order, and (parameter index, key, value)
    of its other values and of each tensor's place; both empty while it has no state."""
    tensors: list[Any] = []
    others: list[Any] = []
    params = (p for group in optimizer.param_groups for p in group["params"])
    for index, param in enumerate(params):
        for key, value in sorted((optimizer.state.get(param) or {}).items(), key=_by_key):
            if isinstance(value, torch.Tensor):
                tensors.append(value)
                others.append([index, str(key), "tensor"])
            else:
                others.append([index, str(key), value])
    return tensors, others


def _by_key(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _hyper(group: dict[str, Any]) -> dict[str, Any]:
    """A parameter group's scalar hyperparameters: numbers and tuples of numbers."""
    found = {}
    for key, value in group.items():
        if key == "params":
            continue
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if _number(value):
            found[key] = value
        elif isinstance(value, (tuple, list)) and value and all(map(_number, value)):
            found[key] = list(value)
    return found


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bytes(tensor: Any) -> bytes:
    """A generator's state (a byte tensor) as bytes: through numpy when the training imported
    it (fast), else element by element (the probe never imports numpy itself)."""
    if "numpy" in sys.modules:
        return bytes(tensor.cpu().numpy().tobytes())
    return bytes(tensor.cpu().tolist())


def _sha16(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def _watch_grad_scalers(note: Callable[[Any], None]) -> None:
    """Wrap torch.amp's GradScaler.scale (its subclasses' too): `note` sees each scaler used."""
    scaler_class = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_class is None or getattr(scaler_class.scale, "_repro_gate_wrapped", False):
        return
    original = scaler_class.scale

    def scale(self: Any, outputs: Any) -> Any:
        note(self)
        return original(self, outputs)

    scale._repro_gate_wrapped = True  # type: ignore[attr-defined]
    scale.__doc__ = original.__doc__
    scaler_class.scale = scale
