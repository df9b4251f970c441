"""safetensors files read as numpy arrays without torch: the package's own dtypes, bfloat16 and
float8 cut out of the file by its header, and broken headers refused with the reason."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from safetensors import SafetensorError
from safetensors.numpy import save_file

from repro_gate.compare.safetensors_file import MAX_HEADER_BYTES, read_header, read_safetensors
from repro_gate.compare.torch_pickle import Corrupt, Refused


def write_by_hand(path: Path, tensors: dict[str, tuple[str, list[int], bytes]],
                  metadata: dict[str, str] | None = None) -> None:
    """A safetensors file written to its documented layout: length, JSON header, data."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    data = b""
    for name, (code, shape, raw) in tensors.items():
        header[name] = {"dtype": code, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_numpy_dtypes_come_back_with_their_values_and_metadata(tmp_path: Path) -> None:
    weights = {"layer.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
               "layer.bias": np.array([-1, 7], dtype=np.int64),
               "mask": np.array([True, False])}
    save_file(weights, str(tmp_path / "m.safetensors"), metadata={"format": "np"})
    tensors, metadata = read_safetensors(tmp_path / "m.safetensors")
    assert set(tensors) == set(weights)
    for name, array in weights.items():
        assert tensors[name].dtype == array.dtype
        np.testing.assert_array_equal(tensors[name], array)
    assert metadata == {"format": "np"}


def test_bfloat16_and_float8_are_typed_through_ml_dtypes(tmp_path: Path) -> None:
    bf16 = np.array([[1.0, -2.5], [0.0, 3.0]], dtype=ml_dtypes.bfloat16)
    fp8 = np.array([0.5, -1.0, 448.0], dtype=ml_dtypes.float8_e4m3fn)
    write_by_hand(tmp_path / "m.safetensors", {
        "bf": ("BF16", [2, 2], bf16.tobytes()), "f8": ("F8_E4M3", [3], fp8.tobytes()),
        "empty": ("BF16", [0, 4], b"")})
    tensors, metadata = read_safetensors(tmp_path / "m.safetensors")
    assert tensors["bf"].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(tensors["bf"].astype(np.float32), bf16.astype(np.float32))
    assert tensors["f8"].tobytes() == fp8.tobytes()
    assert tensors["empty"].shape == (0, 4)
    assert metadata == {}


def test_a_dtype_numpy_cannot_hold_is_refused_by_name(tmp_path: Path) -> None:
    # Two 4-bit floats in one byte: a valid file whose elements numpy has no type for.
    write_by_hand(tmp_path / "m.safetensors", {"q": ("F4", [2], b"\x00")})
    with pytest.raises(Refused, match="safetensors dtype F4"):
        read_safetensors(tmp_path / "m.safetensors")


def test_offsets_that_disagree_with_the_shape_are_corrupt(tmp_path: Path) -> None:
    write_by_hand(tmp_path / "m.safetensors", {"bf": ("BF16", [3], b"\x00" * 4)})
    with pytest.raises(SafetensorError, match="invalid shape, data type, or offset"):
        read_safetensors(tmp_path / "m.safetensors")


@pytest.mark.parametrize(("content", "reason"), [
    (b"\x01\x02", "shorter than a safetensors header"),
    (struct.pack("<Q", MAX_HEADER_BYTES + 1), "over the format's limit"),
    (struct.pack("<Q", 4) + b"{no}", "header is not JSON"),
    (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
])
def test_a_broken_header_is_corrupt_with_the_reason(tmp_path: Path, content: bytes,
                                                    reason: str) -> None:
    path = tmp_path / "broken.safetensors"
    path.write_bytes(content)
    with pytest.raises(Corrupt, match=reason):
        read_header(path)


def test_the_header_lists_each_tensor_s_dtype_shape_and_offsets(tmp_path: Path) -> None:
    save_file({"w": np.zeros((2, 2), dtype=np.float16)}, str(tmp_path / "m.safetensors"))
    header = read_header(tmp_path / "m.safetensors")
    assert header["w"] == {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}
