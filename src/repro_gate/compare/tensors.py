"""Comparing two tensors: bitwise first, then how far apart they are (abs, rel, ULP).

Tensors are numpy arrays here, whichever reader loaded them, so the results are the same with
torch and without it; names and dtypes are reported as torch prints them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from repro_gate.compare.dtypes import ULP_DTYPES, dtype_name
from repro_gate.compare.status import (
    DIFFERENT,
    DTYPE_MISMATCH,
    EQUAL,
    SHAPE_MISMATCH,
    WITHIN_TOLERANCE,
)
from repro_gate.compare.tolerance import Tolerance, magnitude

# Statistics on differing tensors run in chunks so a huge tensor never needs float64 copies.
CHUNK_ELEMENTS = 1 << 22
_SIGNED_BY_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_LOW_32_BITS = 0xFFFFFFFF


def describe(name: str, tensor: np.ndarray, status: str) -> dict[str, Any]:
    """A `tensor_diff` carrying the name, status, dtype and shape of one tensor."""
    return {
        "name": name,
        "status": status,
        "dtype": dtype_name(tensor),
        "shape": list(tensor.shape),
        "total_elements": int(tensor.size),
    }


def compare_tensors(
    name: str, a: np.ndarray, b: np.ndarray, tolerance: Tolerance | None
) -> dict[str, Any]:
    """The `tensor_diff` of two tensors; statistics are filled in only when they differ."""
    if a.dtype != b.dtype:
        return describe(name, a, DTYPE_MISMATCH)
    if a.shape != b.shape:
        return describe(name, a, SHAPE_MISMATCH)
    flat_a, flat_b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    bits_a, bits_b = element_bits(flat_a), element_bits(flat_b)
    if np.array_equal(bits_a, bits_b):
        return describe(name, a, EQUAL)
    stats = DiffStats()
    for start in range(0, flat_a.size, CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        stats.add_chunk(
            flat_a[start:stop], flat_b[start:stop], bits_a[start:stop], bits_b[start:stop],
            tolerance,
        )
    status = WITHIN_TOLERANCE if tolerance is not None and stats.all_within else DIFFERENT
    return describe(name, a, status) | stats.as_dict(dtype_name(a))


def element_bits(flat: np.ndarray) -> np.ndarray:
    """The raw bits of each element as signed integers: 1-D, or (n, 2) for 16-byte elements."""
    signed = _SIGNED_BY_SIZE.get(flat.dtype.itemsize)
    if signed is not None:
        return flat.view(signed)
    return flat.view(np.int64).reshape(flat.size, -1)


@dataclass
class DiffStats:
    """Running statistics over the elements of two tensors, chunk by chunk."""

    differing: int = 0
    max_abs: float = 0.0
    max_rel: float | None = None
    max_ulp: int = 0
    not_finite: bool = False  # some difference involves inf or NaN against a number
    all_within: bool = True

    def add_chunk(
        self,
        a: np.ndarray,
        b: np.ndarray,
        bits_a: np.ndarray,
        bits_b: np.ndarray,
        tolerance: Tolerance | None,
    ) -> None:
        """Fold one chunk in; only the elements whose bits differ are looked at."""
        differs = bits_a != bits_b
        if differs.ndim > 1:
            differs = differs.any(axis=1)
        count = int(differs.sum())
        if count == 0:
            return
        self.differing += count
        if a.dtype == np.bool_:
            self.all_within = False
            return
        if dtype_name(a) in ULP_DTYPES:
            self.max_ulp = max(self.max_ulp, max_ulp_distance(bits_a[differs], bits_b[differs]))
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
        values_a, values_b = a[differs].astype(wide), b[differs].astype(wide)
        with np.errstate(all="ignore"):  # inf - inf and overflow are judged below, not warned
            self.fold_differences(values_a, values_b, tolerance)

    def fold_differences(
        self, values_a: np.ndarray, values_b: np.ndarray, tolerance: Tolerance | None
    ) -> None:
        """Fold in the differing elements, widened to float64 (complex128)."""
        both_nan = np.isnan(values_a) & np.isnan(values_b)
        abs_diff = np.where(both_nan, 0.0, magnitude(values_a - values_b))
        magnitude_b = magnitude(values_b)
        finite = np.isfinite(abs_diff)
        if not bool(finite.all()):
            self.not_finite = True
        if bool(finite.any()):
            self.max_abs = max(self.max_abs, float(abs_diff[finite].max()))
            relative = finite & (magnitude_b > 0)
            if bool(relative.any()):
                chunk_rel = float((abs_diff[relative] / magnitude_b[relative]).max())
                if not math.isfinite(chunk_rel):  # overflow: |b| tiny against |a - b|
                    self.not_finite = True
                    chunk_rel = 0.0
                self.max_rel = chunk_rel if self.max_rel is None else max(self.max_rel, chunk_rel)
        if tolerance is not None and self.all_within:
            self.all_within = tolerance.allows_all(values_a, values_b)

    def as_dict(self, dtype: str) -> dict[str, Any]:
        """The statistics fields of a `tensor_diff` (null where a value has no finite meaning)."""
        numeric = dtype != "bool" and not self.not_finite
        return {
            "differing_elements": self.differing,
            "max_abs_diff": self.max_abs if numeric else None,
            "max_rel_diff": self.max_rel if numeric else None,
            "max_ulp": self.max_ulp if dtype in ULP_DTYPES else None,
        }


def max_ulp_distance(bits_a: np.ndarray, bits_b: np.ndarray) -> int:
    """Largest number of representable floats between paired elements, given their raw bits.

    Floats are sign-magnitude; ordered on the number line, -0.0 and +0.0 are 1 apart. With the
    same sign the distance is |mag_a - mag_b|; with opposite signs it is mag_a + mag_b + 1.
    """
    sign_bit = 1 << (8 * bits_a.dtype.itemsize - 1)
    magnitude_mask = bits_a.dtype.type(sign_bit - 1)
    negative_a, negative_b = bits_a < 0, bits_b < 0
    magnitude_a = (bits_a & magnitude_mask).astype(np.int64)
    magnitude_b = (bits_b & magnitude_mask).astype(np.int64)
    same_sign = negative_a == negative_b
    best = 0
    if bool(same_sign.any()):
        best = int(np.abs(magnitude_a[same_sign] - magnitude_b[same_sign]).max())
    opposite = ~same_sign
    if bool(opposite.any()):
        best = max(best, largest_sum_plus_one(magnitude_a[opposite], magnitude_b[opposite]))
    return best


def largest_sum_plus_one(x: np.ndarray, y: np.ndarray) -> int:
    """max(x + y) + 1 for non-negative int64 arrays whose sums may not fit in int64."""
    # Split into 32-bit halves so no partial sum overflows, then compare (high, low) pairs.
    low = (x & _LOW_32_BITS) + (y & _LOW_32_BITS) + 1
    high = (x >> 32) + (y >> 32) + (low >> 32)
    low = low & _LOW_32_BITS
    top = high.max()
    return (int(top) << 32) + int(low[high == top].max())
