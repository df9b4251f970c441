"""64-bit digests of tensors' raw bits, computed on the tensor's device with integer arithmetic.

Each element's bits are read as a b-bit signed integer x (b = 8, 16, 32 or 64, the element width)
and the flat tensor is laid out as rows of ROW_ELEMENTS = 256 columns (the last row padded with
zeros). With column weights w_c = 2c + 1 and odd row weights v_r = M * (2r + 1) (M odd):

    S_r = sum_c w_c * x[r, c]   (mod 2**b, read as a signed b-bit integer)
    D   = sum_r v_r * S_r       (mod 2**64)

and the digest is a fixed bijective mix of D, the element count and the element width.
All arithmetic is modular integer arithmetic, so the result does not depend on the order of the
additions and is the same on every device. Guarantees, for a tensor of fewer than 2**39 elements
(fewer than 2**31 rows):

- Changing the bits of any single element always changes the digest (w_c and v_r are odd, so each
  step is a bijection in that element).
- Swapping two elements with different bits in the same column (positions that differ by a
  multiple of 256) always changes the digest for widths up to 32 bits; for 64-bit elements,
  unless the two values agree in their low 33 bits.
- Swapping two elements x, y in the same row at columns c, c' changes the digest if and only if
  x != y (mod 2**(b - 1 - v)), where 2**v is the largest power of two dividing c - c' (v <= 7).
  For float32, float16/bfloat16 and float64 this means: always when the two values differ
  anywhere in their low 24, 8 or 56 bits; swapping a value with its exact negation (only the
  sign bit differs) within a row is not detected.
- Other swaps change the digest unless a specific linear relation modulo 2**64 holds between the
  two values and their positions (it does not for almost all pairs); this is not guaranteed.

That is the *ordered* digest, for what can differ by order alone: the input batch (shuffled
samples) and module outputs. Parameters and gradients differ by value (a reduction in another
order changes low bits, never only places), and the *value* digest drops the column weights
(w_c = 1): S_r is a plain row sum, which torch computes on all its threads at memory speed,
where the integer matrix product runs on one thread at a fraction of that. The first two
guarantees hold for it too (any single element's change; any swap between rows that differ in
bits); swaps within a row of 256 are not detected. On CPU the ordered row sums are one integer
matrix product; on other devices, where integer matmul is unavailable, a multiply and a row sum.
"""

from __future__ import annotations

from typing import Any

import torch

ROW_ELEMENTS = 256
_MASK64 = (1 << 64) - 1
_ROW_WEIGHT_MULTIPLIER = 0x9E3779B97F4A7C15
_INT_BY_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_column_weights_cache: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_row_weights_cache: dict[torch.device, torch.Tensor] = {}


def _signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _mix64(value: int) -> int:
    """splitmix64 finaliser: spreads the bits of a 64-bit value (cosmetic, a bijection)."""
    value &= _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def _row_weights(device: torch.device, rows: int) -> torch.Tensor:
    """v_r = M * (2r + 1) modulo 2**64 for at least `rows` rows; cached per device, grown."""
    weights = _row_weights_cache.get(device)
    if weights is None or weights.numel() < rows:
        size = 1 << max(rows - 1, 1).bit_length()
        weights = torch.arange(size, dtype=torch.int64, device=device) * 2 + 1
        weights.mul_(_signed64(_ROW_WEIGHT_MULTIPLIER))
        _row_weights_cache[device] = weights
    return weights


def _column_weights(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """w_c = 2c + 1 modulo 2**b, as b-bit signed integers; cached per device and width."""
    key = (device, dtype)
    weights = _column_weights_cache.get(key)
    if weights is None:
        bits = torch.iinfo(dtype).bits
        odd = torch.arange(ROW_ELEMENTS, dtype=torch.int64) * 2 + 1
        # Reduce modulo 2**b and read as signed so the cast to the narrow type is exact.
        odd = ((odd + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))
        weights = odd.to(dtype).to(device)
        _column_weights_cache[key] = weights
    return weights


def _as_integers(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bits as a flat tensor of same-width signed integers (no copy if contiguous)."""
    data = tensor.detach()
    if data.is_complex():
        data = torch.view_as_real(data)
    flat = data.contiguous().reshape(-1)
    return flat.view(_INT_BY_WIDTH[flat.element_size()])


def _row_sums_matmul(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r as int64, by an integer matrix product (wraps modulo 2**b; CPU only)."""
    # On CPU this is faster than mv, and single-threaded, so it does not stall on a busy core.
    return torch.mm(rows, weights.view(-1, 1)).view(-1).to(torch.int64)


def _row_sums_plain(rows: torch.Tensor) -> torch.Tensor:
    """S_r with w_c = 1 (the value digest), as int64; wraps modulo 2**b, on any device."""
    return rows.sum(1, dtype=rows.dtype).to(torch.int64)


def _row_sums_elementwise(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r as int64, by a wrapping multiply and a row sum in the b-bit type (any device)."""
    return torch.mul(rows, weights).sum(1, dtype=rows.dtype).to(torch.int64)


def _row_sums(rows: torch.Tensor, weights: torch.Tensor, ordered: bool) -> torch.Tensor:
    if not ordered:
        return _row_sums_plain(rows)
    if rows.device.type == "cpu":
        return _row_sums_matmul(rows, weights)
    return _row_sums_elementwise(rows, weights)


def _device_sum(tensor: torch.Tensor, ordered: bool) -> torch.Tensor:
    """D for one tensor, as a 0-dim int64 tensor on its device (no host sync)."""
    ints = _as_integers(tensor)
    device = ints.device
    weights = _column_weights(device, ints.dtype)
    full_rows, tail = divmod(ints.numel(), ROW_ELEMENTS)
    row_weights = _row_weights(device, full_rows + 1)
    total = torch.zeros((), dtype=torch.int64, device=device)
    if full_rows:
        matrix = ints[: full_rows * ROW_ELEMENTS].view(full_rows, ROW_ELEMENTS)
        total += torch.mul(_row_sums(matrix, weights, ordered), row_weights[:full_rows]).sum()
    if tail:
        last = ints[full_rows * ROW_ELEMENTS :].view(1, tail)
        total += _row_sums(last, weights[:tail], ordered)[0] * row_weights[full_rows]
    return total


class PendingDigests:
    """Digests whose device work is queued (on CPU: done) but not yet read back to the host.

    Reading back is what makes the host wait for an accelerator, so a step's digests (gradients
    before the update, parameters after it, inputs) are all read in one transfer per device.
    """

    def __init__(self, tensors: list[Any], ordered: bool) -> None:
        self.salts = [None if t is None else _salt(t) for t in tensors]
        self.sums = [None if t is None else _device_sum(t, ordered) for t in tensors]


def start_digests(tensors: list[Any], *, ordered: bool) -> PendingDigests:
    """Queue the ordered or value digests of `tensors` (None stays None)."""
    return PendingDigests(tensors, ordered)


def finish_digests(*pending: PendingDigests) -> list[list[str | None]]:
    """The 16-hex-digit digests of each pending batch, with one host transfer per device."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for batch in pending:
        for value in batch.sums:
            if value is not None:
                by_device.setdefault(value.device, []).append(value)
    read: dict[int, int] = {}
    for values in by_device.values():
        for value, number in zip(values, torch.stack(values).tolist(), strict=True):
            read[id(value)] = number
    return [
        [None if value is None else f"{_mix64(read[id(value)] + salt):016x}"  # type: ignore[operator]
         for value, salt in zip(batch.sums, batch.salts, strict=True)]
        for batch in pending
    ]


def digest_tensors(tensors: list[Any], *, ordered: bool = True) -> list[str]:
    """One 16-hex-digit digest per tensor, with one host transfer per device."""
    return [d for d in finish_digests(start_digests(tensors, ordered=ordered))[0] if d is not None]


def combine_digests(digests: list[str]) -> str:
    """One digest of a sequence of digests, order-sensitive (the tensors of a step's inputs)."""
    value = len(digests)
    for digest in digests:
        value = _mix64(value * _ROW_WEIGHT_MULTIPLIER + int(digest, 16))
    return f"{value:016x}"


def _salt(tensor: torch.Tensor) -> int:
    return tensor.numel() * 0x9E3779B97F4A7C15 + tensor.element_size()
