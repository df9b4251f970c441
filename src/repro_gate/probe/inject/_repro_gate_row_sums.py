"""The integer arithmetic of the digest (its formula is in _repro_gate_digest's docstring).

The weights w_c and v_r, a tensor's raw bits as integers, the row sums S_r of a matrix of rows,
and D of one segment of a tensor summed alone, without a copy. All of it is modular integer
arithmetic: row sums wrap modulo 2**b in the b-bit type, and multiplying them by the int64 v_r
promotes them to int64 exactly, as signed values, which is S_r as the formula reads it.
"""

from __future__ import annotations

import torch

ROW_ELEMENTS = 256
ROW_WEIGHT_MULTIPLIER = 0x9E3779B97F4A7C15
_INT_BY_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_SIGNED = frozenset(_INT_BY_WIDTH.values())
_column_weights_cache: dict[tuple[torch.device, torch.dtype, bool], torch.Tensor] = {}
_row_weights_cache: dict[torch.device, torch.Tensor] = {}


def signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def row_weights(device: torch.device, rows: int) -> torch.Tensor:
    """v_r = M * (2r + 1) modulo 2**64 for at least `rows` rows; cached per device, grown."""
    weights = _row_weights_cache.get(device)
    if weights is None or weights.numel() < rows:
        size = 1 << max(rows - 1, 1).bit_length()
        weights = torch.arange(size, dtype=torch.int64, device=device) * 2 + 1
        weights.mul_(signed64(ROW_WEIGHT_MULTIPLIER))
        _row_weights_cache[device] = weights
    return weights


def column_weights(device: torch.device, dtype: torch.dtype, ordered: bool = True) -> torch.Tensor:
    """w_c = 2c + 1 modulo 2**b (ordered) or 1, as a column of b-bit signed integers; cached."""
    key = (device, dtype, ordered)
    weights = _column_weights_cache.get(key)
    if weights is None:
        bits = torch.iinfo(dtype).bits
        odd = torch.arange(ROW_ELEMENTS, dtype=torch.int64) * 2 + 1
        # Reduce modulo 2**b and read as signed so the cast to the narrow type is exact.
        odd = ((odd + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))
        weights = (odd if ordered else torch.ones_like(odd)).to(dtype).to(device).view(-1, 1)
        _column_weights_cache[key] = weights
    return weights


def integer_dtype(dtype: torch.dtype) -> torch.dtype:
    """The signed integer type of the same width (of a complex type's real parts)."""
    width = torch.empty(0, dtype=dtype).element_size()
    return _INT_BY_WIDTH[width // 2 if dtype.is_complex else width]


def as_integers(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bits as a flat tensor of same-width signed integers (no copy if contiguous)."""
    if tensor.dim() == 1 and tensor.dtype in _SIGNED and tensor.is_contiguous() \
            and not tensor.requires_grad:
        return tensor  # already so: a segment of another tensor's integers
    data = tensor.detach() if tensor.requires_grad else tensor
    if data.is_complex():
        data = torch.view_as_real(data)
    flat = data.reshape(-1)
    return flat.view(_INT_BY_WIDTH[flat.element_size()])


def row_sums_matmul(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r by an integer matrix product with the column `weights` (CPU only)."""
    # Faster than mv, and single-threaded: it does not stall on a busy core.
    return torch.mm(rows, weights).view(-1)


def row_sums_plain(rows: torch.Tensor) -> torch.Tensor:
    """S_r with w_c = 1 (the value digest), by a row sum in the b-bit type (any device)."""
    return rows.sum(1, dtype=rows.dtype)


def row_sums_elementwise(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r by a wrapping multiply by the column `weights`, and a row sum in the b-bit type."""
    return torch.mul(rows, weights.view(1, -1)).sum(1, dtype=rows.dtype)


def row_sums(rows: torch.Tensor, ordered: bool) -> torch.Tensor:
    """S_r of each row of `rows` (as many columns as w has or fewer), as b-bit integers."""
    weights = column_weights(rows.device, rows.dtype, ordered)
    if rows.shape[1] < ROW_ELEMENTS:  # a partial last row
        weights = weights[: rows.shape[1]]
    if rows.device.type == "cpu":
        return row_sums_matmul(rows, weights)
    if not ordered:
        return row_sums_plain(rows)
    return row_sums_elementwise(rows, weights)


def segment_sum(ints: torch.Tensor, first_row: int, ordered: bool) -> torch.Tensor:
    """D of the flat integers `ints`, which start at row `first_row` of their tensor (their r in
    v_r), summed without a copy, as a 1-element int64 tensor."""
    full_rows, tail = divmod(ints.numel(), ROW_ELEMENTS)
    sums = row_sums(ints[: full_rows * ROW_ELEMENTS].view(-1, ROW_ELEMENTS), ordered)
    if tail:  # the partial last row
        sums = torch.cat([sums, row_sums(ints[full_rows * ROW_ELEMENTS :].view(1, tail), ordered)])
    count = sums.numel()
    weights = row_weights(ints.device, first_row + count)[first_row : first_row + count]
    return torch.mul(sums, weights).sum(0, keepdim=True)
