"""torch.load(weights_only=True) for the files the restricted reader refuses, when torch is here.

Its tensors are turned into numpy arrays bit for bit, so they are compared by the same code as
the reader's (`compare.tensors`) and give the same results.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro_gate.compare.dtypes import NOT_NATIVE_TO_NUMPY, NUMPY_DTYPES
from repro_gate.compare.torch_pickle import Refused, Size

_SIGNED_BY_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def torch_load(path: Path, layout: str) -> Any:
    """`torch.load(weights_only=True)` on the CPU, memory-mapping zip files where torch can."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if layout == "zip":
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except (RuntimeError, ValueError):
                pass  # e.g. a layout mmap does not support; a plain load says what is wrong
        return torch.load(path, map_location="cpu", weights_only=True)


def to_numpy_tree(value: Any) -> Any:
    """A loaded object with its tensors as numpy arrays and `torch.Size` as the reader's Size."""
    if isinstance(value, torch.Tensor):
        return to_numpy(value)
    if isinstance(value, torch.Size):
        return Size(value)
    if isinstance(value, dict):
        return {key: to_numpy_tree(child) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        children = [to_numpy_tree(child) for child in value]
        return children if isinstance(value, list) else tuple(children)
    return value


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's elements as a numpy array with the same bits (bfloat16 and float8 included)."""
    tensor = plain(tensor)
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in NUMPY_DTYPES:
        raise Refused(f"tensors of dtype {name}")
    if name in NOT_NATIVE_TO_NUMPY:
        bits = tensor.view(_SIGNED_BY_SIZE[tensor.element_size()]).numpy()
        return bits.view(NUMPY_DTYPES[name])
    return tensor.numpy()


def plain(tensor: torch.Tensor) -> torch.Tensor:
    """A dense, contiguous tensor with no lazy conjugate/negative bit, on the CPU."""
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    if tensor.is_quantized:
        tensor = tensor.dequantize()
    return tensor.resolve_conj().resolve_neg().contiguous()
