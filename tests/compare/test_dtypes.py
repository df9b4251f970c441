"""Checkpoint element types as numpy dtypes: torch's names, safetensors' codes, the types numpy
lacks (bfloat16, float8) and the unit a byte-order change reverses."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from repro_gate.compare.dtypes import (
    NOT_NATIVE_TO_NUMPY,
    NUMPY_DTYPES,
    SAFETENSORS_DTYPES,
    STORAGE_DTYPES,
    ULP_DTYPES,
    byteswap_unit,
    dtype_name,
)


def test_every_dtype_is_named_as_torch_prints_it() -> None:
    for name, dtype in NUMPY_DTYPES.items():
        assert dtype_name(np.zeros(2, dtype=dtype)) == name


def test_the_types_numpy_lacks_come_from_ml_dtypes_with_torch_s_bit_layout() -> None:
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2"} <= NOT_NATIVE_TO_NUMPY
    assert not NOT_NATIVE_TO_NUMPY & {"float32", "float16", "int64", "bool", "complex64"}
    # bfloat16 is the top half of a float32: 1.0 is 0x3F80.
    one = np.array([1.0], dtype=NUMPY_DTYPES["bfloat16"])
    assert one.view(np.uint16)[0] == 0x3F80
    assert NUMPY_DTYPES["bfloat16"] == np.dtype(ml_dtypes.bfloat16)


def test_every_safetensors_code_and_storage_class_names_a_known_dtype() -> None:
    assert set(SAFETENSORS_DTYPES.values()) <= set(NUMPY_DTYPES)
    assert set(STORAGE_DTYPES.values()) <= set(NUMPY_DTYPES)
    assert (SAFETENSORS_DTYPES["BF16"], STORAGE_DTYPES["BFloat16Storage"]) == ("bfloat16",) * 2
    assert STORAGE_DTYPES["UntypedStorage"] == "uint8"


def test_only_the_floating_types_with_a_number_line_carry_ulps() -> None:
    assert all(NUMPY_DTYPES[name].kind in "fV" for name in ULP_DTYPES)
    assert "int32" not in ULP_DTYPES and "complex64" not in ULP_DTYPES


@pytest.mark.parametrize(("name", "unit"), [
    ("float64", 8), ("float32", 4), ("bfloat16", 2), ("uint8", 1), ("bool", 1),
    ("complex64", 4), ("complex128", 8),
])
def test_a_byte_order_change_reverses_each_complex_part_apart(name: str, unit: int) -> None:
    assert byteswap_unit(NUMPY_DTYPES[name]) == unit
