"""safetensors files as numpy arrays, without torch.

The safetensors package reads every dtype numpy has (`framework="np"`, which also checks the
header); bfloat16 and the float8 types, which its numpy API cannot return, are cut out of the
file at the offsets its documented header gives (8-byte little-endian length, then JSON) and
typed through `ml_dtypes`.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from repro_gate.compare.dtypes import NOT_NATIVE_TO_NUMPY, NUMPY_DTYPES, SAFETENSORS_DTYPES
from repro_gate.compare.torch_pickle import Corrupt, Refused

HEADER_LENGTH = struct.Struct("<Q")
# The format's own limit on the JSON header.
MAX_HEADER_BYTES = 100 * 1024 * 1024


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors in the package's key order, metadata). Refused for a dtype numpy cannot hold;
    Corrupt, or the package's own exception, for a broken file."""
    header = read_header(path)
    tensors: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="np") as handle, open(path, "rb") as stream:
        mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        data_start = HEADER_LENGTH.size + HEADER_LENGTH.unpack_from(mapped)[0]
        for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
            entry = header[name]
            dtype = SAFETENSORS_DTYPES.get(entry["dtype"])
            if dtype is None:
                raise Refused(f"safetensors dtype {entry['dtype']}")
            if dtype in NOT_NATIVE_TO_NUMPY:
                tensors[name] = cut(mapped, data_start, entry, NUMPY_DTYPES[dtype])
            else:
                tensors[name] = handle.get_tensor(name)
        metadata = dict(handle.metadata() or {})
    return tensors, metadata


def read_header(path: Path) -> dict[str, Any]:
    """The JSON header: tensor name -> {dtype, shape, data_offsets}, plus `__metadata__`."""
    with open(path, "rb") as stream:
        prefix = stream.read(HEADER_LENGTH.size)
        if len(prefix) < HEADER_LENGTH.size:
            raise Corrupt("shorter than a safetensors header")
        (length,) = HEADER_LENGTH.unpack(prefix)
        if length > MAX_HEADER_BYTES:
            raise Corrupt(f"header of {length} bytes is over the format's limit")
        text = stream.read(length)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Corrupt(f"header is not JSON ({error})") from error
    if not isinstance(header, dict):
        raise Corrupt("header is not a JSON object")
    return header


def cut(mapped: mmap.mmap, data_start: int, entry: dict[str, Any], dtype: np.dtype) -> np.ndarray:
    """One tensor's bytes from the mapped file, typed and shaped (a read-only view)."""
    begin, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    if end - begin != math.prod(shape) * dtype.itemsize or data_start + end > len(mapped):
        raise Corrupt("a tensor's offsets do not match its shape")
    if end == begin:
        return np.zeros(shape, dtype=dtype)
    raw = np.frombuffer(mapped, dtype=np.uint8, count=end - begin, offset=data_start + begin)
    return raw.view(dtype).reshape(shape)
