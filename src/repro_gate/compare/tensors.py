"""Comparing two tensors: bitwise first, then how far apart they are (abs, rel, ULP)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from repro_gate.compare.status import (
    DIFFERENT,
    DTYPE_MISMATCH,
    EQUAL,
    SHAPE_MISMATCH,
    WITHIN_TOLERANCE,
)
from repro_gate.compare.tolerance import Tolerance

# Statistics on differing tensors run in chunks so a huge tensor never needs float64 copies.
CHUNK_ELEMENTS = 1 << 22
ULP_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_SIGNED_BY_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_LOW_32_BITS = 0xFFFFFFFF


def dtype_name(dtype: torch.dtype) -> str:
    """`float32` rather than `torch.float32`."""
    return str(dtype).removeprefix("torch.")


def describe(name: str, tensor: torch.Tensor, status: str) -> dict[str, Any]:
    """A `tensor_diff` carrying the name, status, dtype and shape of one tensor."""
    return {
        "name": name,
        "status": status,
        "dtype": dtype_name(tensor.dtype),
        "shape": list(tensor.shape),
        "total_elements": tensor.numel(),
    }


def compare_tensors(
    name: str, a: torch.Tensor, b: torch.Tensor, tolerance: Tolerance | None
) -> dict[str, Any]:
    """The `tensor_diff` of two tensors; statistics are filled in only when they differ."""
    a, b = plain(a), plain(b)
    if a.dtype != b.dtype:
        return describe(name, a, DTYPE_MISMATCH)
    if a.shape != b.shape:
        return describe(name, a, SHAPE_MISMATCH)
    bits_a, bits_b = element_bits(a), element_bits(b)
    if torch.equal(bits_a, bits_b):
        return describe(name, a, EQUAL)
    stats = DiffStats()
    for start in range(0, a.numel(), CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        stats.add_chunk(
            a.reshape(-1)[start:stop],
            b.reshape(-1)[start:stop],
            bits_a[start:stop],
            bits_b[start:stop],
            tolerance,
        )
    status = WITHIN_TOLERANCE if tolerance is not None and stats.all_within else DIFFERENT
    return describe(name, a, status) | stats.as_dict(a.dtype)


def plain(tensor: torch.Tensor) -> torch.Tensor:
    """A dense, contiguous tensor with no lazy conjugate/negative bit, on the CPU."""
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    if tensor.is_quantized:
        tensor = tensor.dequantize()
    return tensor.resolve_conj().resolve_neg().contiguous()


def element_bits(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bits of each element as signed integers: 1-D, or (n, 2) for 16-byte elements."""
    flat = tensor.reshape(-1)
    signed = _SIGNED_BY_SIZE.get(flat.element_size())
    if signed is not None:
        return flat.view(signed)
    return flat.view(torch.int64).reshape(flat.numel(), -1)


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
        a: torch.Tensor,
        b: torch.Tensor,
        bits_a: torch.Tensor,
        bits_b: torch.Tensor,
        tolerance: Tolerance | None,
    ) -> None:
        """Fold one chunk in; only the elements whose bits differ are looked at."""
        differs = bits_a != bits_b
        if differs.dim() > 1:
            differs = differs.any(dim=1)
        count = int(differs.sum())
        if count == 0:
            return
        self.differing += count
        if a.dtype == torch.bool:
            self.all_within = False
            return
        if a.dtype in ULP_DTYPES:
            self.max_ulp = max(self.max_ulp, max_ulp_distance(bits_a[differs], bits_b[differs]))
        wide = torch.complex128 if a.is_complex() else torch.float64
        values_a, values_b = a[differs].to(wide), b[differs].to(wide)
        both_nan = values_a.isnan() & values_b.isnan()
        abs_diff = (values_a - values_b).abs().masked_fill(both_nan, 0.0)
        magnitude_b = values_b.abs()
        finite = abs_diff.isfinite()
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
            allowed = tolerance.atol + tolerance.rtol * magnitude_b
            self.all_within = bool(((abs_diff <= allowed) | both_nan).all())

    def as_dict(self, dtype: torch.dtype) -> dict[str, Any]:
        """The statistics fields of a `tensor_diff` (null where a value has no finite meaning)."""
        numeric = dtype != torch.bool and not self.not_finite
        return {
            "differing_elements": self.differing,
            "max_abs_diff": self.max_abs if numeric else None,
            "max_rel_diff": self.max_rel if numeric else None,
            "max_ulp": self.max_ulp if dtype in ULP_DTYPES else None,
        }


def max_ulp_distance(bits_a: torch.Tensor, bits_b: torch.Tensor) -> int:
    """Largest number of representable floats between paired elements, given their raw bits.

    Floats are sign-magnitude; ordered on the number line, -0.0 and +0.0 are 1 apart. With the
    same sign the distance is |mag_a - mag_b|; with opposite signs it is mag_a + mag_b + 1.
    """
    sign_bit = 1 << (8 * bits_a.element_size() - 1)
    magnitude_mask = sign_bit - 1
    negative_a, negative_b = bits_a < 0, bits_b < 0
    magnitude_a = (bits_a & magnitude_mask).to(torch.int64)
    magnitude_b = (bits_b & magnitude_mask).to(torch.int64)
    same_sign = negative_a == negative_b
    best = 0
    if bool(same_sign.any()):
        best = int((magnitude_a[same_sign] - magnitude_b[same_sign]).abs().max())
    opposite = ~same_sign
    if bool(opposite.any()):
        best = max(best, largest_sum_plus_one(magnitude_a[opposite], magnitude_b[opposite]))
    return best


def largest_sum_plus_one(x: torch.Tensor, y: torch.Tensor) -> int:
    """max(x + y) + 1 for non-negative int64 tensors whose sums may not fit in int64."""
    # Split into 32-bit halves so no partial sum overflows, then compare (high, low) pairs.
    low = (x & _LOW_32_BITS) + (y & _LOW_32_BITS) + 1
    high = (x >> 32) + (y >> 32) + (low >> 32)
    low = low & _LOW_32_BITS
    top = high.max()
    return (int(top) << 32) + int(low[high == top].max())
