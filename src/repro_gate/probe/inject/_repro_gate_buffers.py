"""The model's registered buffers after each optimizer step: running statistics and the like.

A checkpoint that leaves out BatchNorm's running statistics resumes with parameters that agree
step after step (training-mode BatchNorm normalises with the batch's own statistics) while the
statistics, and every evaluation that uses them, differ. So each step's record carries the
digests of the buffers of the model called in that step (`"buffers": {name: digest}`), as it
carries the parameters', sampled the same way on the host when large (a causal mask).

Every buffer is digested at every step: its version counter cannot tell which were written,
since BatchNorm's kernel updates the running statistics in place without bumping it. The models
are those `StepInputs` saw called in the step (a root module with parameters, under grad mode),
held weakly. With several models in one step, the buffers of the second and later ones are
named `<index>:<name>`.
"""

from __future__ import annotations

import weakref
from typing import Any


def model_buffers(models: list[weakref.ref[Any]]) -> tuple[list[str], list[Any]]:
    """The names and tensors of the buffers of the step's models, in model order."""
    names: list[str] = []
    tensors: list[Any] = []
    for index, ref in enumerate(models):
        model = ref()
        if model is None:
            continue
        prefix = "" if index == 0 else f"{index}:"
        for name, buffer in model.named_buffers():
            names.append(prefix + name)
            tensors.append(buffer.detach())
    return names, tensors
