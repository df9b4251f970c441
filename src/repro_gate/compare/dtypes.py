"""Element types of checkpoint tensors as numpy dtypes, named as torch prints them.

numpy has no bfloat16 or float8; `ml_dtypes` provides them with the same bit layouts as torch,
so every tensor of these types is held and compared as a numpy array, with or without torch.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# torch's name of a dtype (`str(torch.float32)` without `torch.`) -> the numpy dtype.
NUMPY_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(kind)
    for name, kind in {
        "float64": np.float64,
        "float32": np.float32,
        "float16": np.float16,
        "bfloat16": ml_dtypes.bfloat16,
        "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
        "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
        "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
        "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
        "complex128": np.complex128,
        "complex64": np.complex64,
        "int64": np.int64,
        "int32": np.int32,
        "int16": np.int16,
        "int8": np.int8,
        "uint64": np.uint64,
        "uint32": np.uint32,
        "uint16": np.uint16,
        "uint8": np.uint8,
        "bool": np.bool_,
    }.items()
}

# numpy cannot cast these to integers itself (`Tensor.numpy()` refuses them too): torch's side
# moves their bits through a same-sized integer view.
NOT_NATIVE_TO_NUMPY = frozenset(
    name for name, dtype in NUMPY_DTYPES.items() if dtype.type.__module__.startswith("ml_dtypes")
)

# The legacy typed-storage classes that torch.save still names in its pickles.
STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    # Bytes without a type: tensors of the newer dtypes say theirs in `_rebuild_tensor_v3`.
    "UntypedStorage": "uint8",
}

# safetensors' dtype codes (its documented header) -> torch's names.
SAFETENSORS_DTYPES: dict[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "C64": "complex64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}

# The floating types whose results carry a ULP distance.
ULP_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def dtype_name(array: np.ndarray) -> str:
    """torch's name for the element type of `array` (`float32`, `bfloat16`, `bool`)."""
    return str(array.dtype.name)


def byteswap_unit(dtype: np.dtype) -> int:
    """The size of the units whose bytes a byte-order change reverses: complex parts apart."""
    return dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
