"""The integer arithmetic of the digest (its formula is in _repro_gate_digest's docstring).

The weights w_c and v_r, a tensor's raw bits as integers, the row sums S_r of a matrix of rows,
and D of one segment of a tensor summed alone, without a copy. All of it is modular integer
arithmetic. Row sums of elements of up to 32 bits are exact: with odd w_c < 2**13, 256 products of
32-bit values add up to less than 2**52 in magnitude, so a float64 matrix product (on CPU) and an
int64 one (elsewhere) give the same integers in any order of the additions.
"""

from __future__ import annotations

import threading

import torch

ROW_ELEMENTS = 256
ROW_WEIGHT_MULTIPLIER = 0x9E3779B97F4A7C15
ORDERED_WEIGHT_BITS = 13  # w_c < 2**13: exact float64 row sums (see the docstring)
# Ordered rows are widened this many at a time: a bounded scratch buffer (2 MiB of float64 on
# CPU, where it stays in cache; 32 MiB of int64 elsewhere, where each block costs kernel launches).
WIDEN_BLOCK_ROWS = 1024
DEVICE_WIDEN_BLOCK_ROWS = 1 << 14
_MASK64 = (1 << 64) - 1
_INT_BY_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_SIGNED = frozenset(_INT_BY_WIDTH.values())
_ordered_cache: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_row_weights_cache: dict[torch.device, torch.Tensor] = {}
_widened = threading.local()  # this thread's float64 rows for the CPU's exact product


def mix64(value: int) -> int:
    """splitmix64 finaliser: spreads the bits of a 64-bit value (a bijection)."""
    value &= _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def signed64(value: int) -> int:
    value &= _MASK64
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


def ordered_weight_values() -> list[int]:
    """w_c of the digest: the first ROW_ELEMENTS distinct values of
    2 * (mix64(i * M) >> 52) + 1 for i = 1, 2, ...: odd, below 2**13, in no pattern that
    structured data (a linear ramp, equal-sum blocks) could cancel."""
    weights: dict[int, None] = {}
    index = 0
    while len(weights) < ROW_ELEMENTS:
        index += 1
        weights[2 * (mix64(index * ROW_WEIGHT_MULTIPLIER) >> (64 - ORDERED_WEIGHT_BITS + 1)) + 1] \
            = None
    return list(weights)


def ordered_column_weights(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """w_c of the digest as a column of `dtype` (int64, or float64 on CPU); cached."""
    key = (device, dtype)
    weights = _ordered_cache.get(key)
    if weights is None:
        weights = torch.tensor(ordered_weight_values(), dtype=dtype, device=device).view(-1, 1)
        _ordered_cache[key] = weights
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
    """S_r by an integer matrix product with the column `weights` (CPU only), wrapping."""
    # Faster than mv, and single-threaded: it does not stall on a busy core.
    return torch.mm(rows, weights).view(-1)


def row_sums_elementwise(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r by a wrapping multiply by the column `weights`, and a row sum in the type of both."""
    return torch.mul(rows, weights.view(1, -1)).sum(1, dtype=weights.dtype)


def row_sums_exact_float64(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Ordered S_r of rows of up to 32-bit integers, exactly, as int64, by float64 matrix
    products (CPU only) of blocks of rows copied into one reused buffer."""
    scratch = getattr(_widened, "rows", None)
    if scratch is None or scratch.shape[0] < WIDEN_BLOCK_ROWS:
        scratch = _widened.rows = torch.empty(WIDEN_BLOCK_ROWS, ROW_ELEMENTS, dtype=torch.float64)
    columns = rows.shape[1]
    sums = []
    for start in range(0, max(rows.shape[0], 1), WIDEN_BLOCK_ROWS):  # one, if empty
        block = rows[start : start + WIDEN_BLOCK_ROWS]
        widened = scratch[: block.shape[0], :columns]
        widened.copy_(block)
        sums.append(torch.mm(widened, weights).view(-1))
    return torch.cat(sums).to(torch.int64)


def row_sums_exact_int64(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The same exact S_r on any device, by int64 products of blocks of widened rows."""
    block = DEVICE_WIDEN_BLOCK_ROWS
    sums = [row_sums_elementwise(rows[start : start + block].to(torch.int64), weights)
            for start in range(0, max(rows.shape[0], 1), block)]
    return sums[0] if len(sums) == 1 else torch.cat(sums)  # one op less per step on a device


def row_sums(rows: torch.Tensor) -> torch.Tensor:
    """S_r of each row of `rows` (as many columns as w has or fewer), as int64."""
    columns, on_cpu = rows.shape[1], rows.device.type == "cpu"
    if rows.dtype == torch.int64:  # 64-bit elements: modulo 2**64
        weights = ordered_column_weights(rows.device, torch.int64)[:columns]
        return row_sums_matmul(rows, weights) if on_cpu else row_sums_elementwise(rows, weights)
    if on_cpu:
        weights = ordered_column_weights(rows.device, torch.float64)[:columns]
        return row_sums_exact_float64(rows, weights)
    return row_sums_exact_int64(rows, ordered_column_weights(rows.device, torch.int64)[:columns])


def segment_sum(ints: torch.Tensor, first_row: int) -> torch.Tensor:
    """D of the flat integers `ints`, which start at row `first_row` of their tensor (their r in
    v_r), summed without a copy, as a 1-element int64 tensor."""
    full_rows, tail = divmod(ints.numel(), ROW_ELEMENTS)
    sums = row_sums(ints[: full_rows * ROW_ELEMENTS].view(-1, ROW_ELEMENTS))
    if tail:  # the partial last row
        sums = torch.cat([sums, row_sums(ints[full_rows * ROW_ELEMENTS :].view(1, tail))])
    count = sums.numel()
    weights = row_weights(ints.device, first_row + count)[first_row : first_row + count]
    return torch.mul(sums, weights).sum(0, keepdim=True)
