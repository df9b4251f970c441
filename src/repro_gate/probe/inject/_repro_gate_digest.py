"""64-bit digests of tensors' raw bits, computed on the tensor's device with integer arithmetic.

Each element's bits are read as a b-bit signed integer x (b = 8, 16, 32 or 64, the element width)
and the flat tensor is laid out as rows of ROW_ELEMENTS = 256 columns (the last row padded with
zeros). With column weights w_c = 2c + 1 and odd row weights v_r = M * (2r + 1) (M odd):

    S_r = sum_c w_c * x[r, c]   (mod 2**b, read as a signed b-bit integer)
    D   = sum_r v_r * S_r       (mod 2**64)

and the digest is a fixed bijective mix of D, the element count and the element width.
All arithmetic is modular integer arithmetic, so the result does not depend on the order of the
additions, nor on how the work is split (below), and is the same on every device. Guarantees, for
a tensor of fewer than 2**39 elements (fewer than 2**31 rows):

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
(w_c = 1): S_r is a plain row sum, one op fewer on accelerators. The first two guarantees hold
for it too (any single element's change; any swap between rows that differ in bits); swaps
within a row of 256 are not detected. On CPU both kinds of row sums are one integer matrix
product (by w, or by ones): it runs on one thread, where torch's reductions use them all and,
on a busy machine, stall waiting for a core (measured: 4 times slower at load 2 on 2 cores).

A *sampled* value digest (`Sample(every=K, phase=p)`) of a tensor of R rows (the partial last
row included) sums only the p-th of its K blocks of B = ceil(R / K) consecutive rows, rows
p*B <= r < min((p + 1) * B, R), with the same v_r: the full D is the sum of the K sampled ones.
A block of consecutive rows is read at memory speed, where every K-th row (1 KiB in every K KiB)
was read 4 times slower on CPU. It is taken only of tensors of at least `min_elements` on a host
device (CPU), where a full pass over every parameter and gradient at every step costs more than
the probe's budget; smaller tensors and other devices are digested in full. A change in a
sampled row is always seen; a change in another row is not, at that step.

How the work is split does not change the values. On the host, segments (tensors, or their
sampled rows) of at least HOST_ALONE_ELEMENTS are summed one by one, without a copy, as are those
of CHUNK_ELEMENTS on accelerators. Everything else is batched, so
that the number of ops does not grow with the number of tensors (on an accelerator each op is a
kernel launch): the tensors of one device and width are concatenated, each padded with zeros to
whole rows, in chunks of at most CHUNK_ELEMENTS; then the row sums, their products with each
row's v_r (r counted from the start of its own tensor), a cumulative sum and its differences at
the tensors' ends give every tensor's D, modulo 2**64, in a fixed number of ops per chunk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
from _repro_gate_host_read import HostRead, on_host

ROW_ELEMENTS = 256
CHUNK_ELEMENTS = 1 << 25  # a batched chunk's copy: 128 MiB of float32 at most
HOST_ALONE_ELEMENTS = 1 << 16  # on the host, larger segments are summed alone (no copy)
_MASK64 = (1 << 64) - 1
_ROW_WEIGHT_MULTIPLIER = 0x9E3779B97F4A7C15
_INT_BY_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_MAX_LAYOUTS = 64  # cached layouts: one per sampling phase (grads and params share it)
_column_weights_cache: dict[tuple[torch.device, torch.dtype, bool], torch.Tensor] = {}
_row_weights_cache: dict[torch.device, torch.Tensor] = {}
_zeros_cache: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_layout_cache: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


@dataclass(frozen=True)
class Sample:
    """Digest only rows r = phase (mod every) of tensors of at least min_elements (host only)."""

    every: int
    phase: int
    min_elements: int


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


def _column_weights(device: torch.device, dtype: torch.dtype,
                    ordered: bool = True) -> torch.Tensor:
    """w_c = 2c + 1 modulo 2**b (ordered) or 1, as b-bit signed integers; cached."""
    key = (device, dtype, ordered)
    weights = _column_weights_cache.get(key)
    if weights is None:
        bits = torch.iinfo(dtype).bits
        odd = torch.arange(ROW_ELEMENTS, dtype=torch.int64) * 2 + 1
        # Reduce modulo 2**b and read as signed so the cast to the narrow type is exact.
        odd = ((odd + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))
        weights = (odd if ordered else torch.ones_like(odd)).to(dtype).to(device)
        _column_weights_cache[key] = weights
    return weights


def _zeros(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """ROW_ELEMENTS zeros, sliced to pad a tensor to whole rows (a view: no op per tensor)."""
    key = (device, dtype)
    if key not in _zeros_cache:
        _zeros_cache[key] = torch.zeros(ROW_ELEMENTS, dtype=dtype, device=device)
    return _zeros_cache[key]


def as_integers(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bits as a flat tensor of same-width signed integers (no copy if contiguous)."""
    data = tensor.detach()
    if data.is_complex():
        data = torch.view_as_real(data)
    flat = data.reshape(-1)
    return flat.view(_INT_BY_WIDTH[flat.element_size()])


# The row sums below are b-bit integers (wrapped modulo 2**b); multiplying them by the int64 v_r
# promotes them to int64 exactly, as signed values, which is S_r as the formula reads it.


def _row_sums_matmul(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r by an integer matrix product (CPU only)."""
    # Faster than mv, and single-threaded: it does not stall on a busy core.
    return torch.mm(rows, weights.view(-1, 1)).view(-1)


def _row_sums_plain(rows: torch.Tensor) -> torch.Tensor:
    """S_r with w_c = 1 (the value digest), by a row sum in the b-bit type (any device)."""
    return rows.sum(1, dtype=rows.dtype)


def _row_sums_elementwise(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """S_r by a wrapping multiply and a row sum in the b-bit type (any device)."""
    return torch.mul(rows, weights).sum(1, dtype=rows.dtype)


def _row_sums(rows: torch.Tensor, ordered: bool) -> torch.Tensor:
    """S_r of each row of `rows` (as many columns as w has or fewer), as b-bit integers."""
    weights = _column_weights(rows.device, rows.dtype, ordered)[: rows.shape[1]]
    if rows.device.type == "cpu":
        return _row_sums_matmul(rows, weights)
    if not ordered:
        return _row_sums_plain(rows)
    return _row_sums_elementwise(rows, weights)


def sampled_rows(rows: int, sample: Sample | None) -> tuple[int, int]:
    """The rows [start, stop) of a tensor of `rows` rows that `sample` takes (all without)."""
    if sample is None:
        return 0, rows
    block = -(-rows // sample.every)
    start = min(sample.phase * block, rows)
    return start, min(start + block, rows)


@dataclass
class _Segment:
    """What is digested of one tensor: all its elements, or its sampled rows."""

    index: int  # the tensor's position in its batch
    ints: torch.Tensor  # flat integers, starting at a row boundary of the tensor
    first_row: int  # the tensor's row where `ints` starts (its r in v_r)
    sampled: bool

    @classmethod
    def of(cls, index: int, ints: torch.Tensor, sample: Sample | None) -> _Segment:
        if sample is None or sample.every <= 1 or ints.numel() < sample.min_elements \
                or not on_host(ints.device):
            return cls(index, ints, 0, False)
        start, stop = sampled_rows(-(-ints.numel() // ROW_ELEMENTS), sample)
        return cls(index, ints[start * ROW_ELEMENTS : stop * ROW_ELEMENTS], start, True)

    @functools.cached_property
    def rows(self) -> int:
        """Its rows in a batch: an empty segment takes one row of zeros (D = 0)."""
        return max(1, -(-self.ints.numel() // ROW_ELEMENTS))


def _segment_sum(segment: _Segment, ordered: bool) -> torch.Tensor:
    """D of one segment, without copying it, as a 1-element int64 tensor."""
    ints, first = segment.ints, segment.first_row
    full_rows, tail = divmod(ints.numel(), ROW_ELEMENTS)
    sums = _row_sums(ints[: full_rows * ROW_ELEMENTS].view(-1, ROW_ELEMENTS), ordered)
    if tail:  # the partial last row
        sums = torch.cat([sums, _row_sums(ints[full_rows * ROW_ELEMENTS :].view(1, tail), ordered)])
    weights = _row_weights(ints.device, first + sums.numel())[first : first + sums.numel()]
    return torch.mul(sums, weights).sum(0, keepdim=True)


def _layout(device: torch.device, rows: tuple[int, ...],
            first_rows: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """For segments of `rows` rows laid end to end: each row's v_r (r counted within its own
    tensor) and the index of each segment's last row; built once per layout, then cached."""
    key = (device, rows, first_rows)
    cached = _layout_cache.get(key)
    if cached is None:
        if len(_layout_cache) >= _MAX_LAYOUTS:
            _layout_cache.clear()
        spans = [(first, first + count) for count, first in zip(rows, first_rows, strict=True)]
        weights = _row_weights(torch.device("cpu"), max(stop for _, stop in spans))
        local = torch.cat([torch.arange(start, stop) for start, stop in spans])
        last = torch.tensor(rows).cumsum(0) - 1
        cached = (_to_device(weights[local], device), _to_device(last, device))
        _layout_cache[key] = cached
    return cached


def _to_device(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host values copied to `device` without waiting: a copy from pageable memory to a CUDA
    device waits for the device's queue; from pinned memory it does not (an input batch of a
    new shape needs a new layout, which must not stall the step)."""
    if device.type == "cuda":
        return values.pin_memory().to(device, non_blocking=True)
    return values.to(device)


def _chunk_sums(chunk: list[_Segment], ordered: bool) -> torch.Tensor:
    """D of each segment of `chunk` (one device, one width), in a fixed number of ops."""
    zeros = _zeros(chunk[0].ints.device, chunk[0].ints.dtype)
    pieces: list[torch.Tensor] = []
    for segment in chunk:
        pieces.append(segment.ints)
        if segment.rows * ROW_ELEMENTS > segment.ints.numel():
            pieces.append(zeros[: segment.rows * ROW_ELEMENTS - segment.ints.numel()])
    matrix = torch.cat(pieces).view(-1, ROW_ELEMENTS)
    weights, last = _layout(matrix.device, tuple(s.rows for s in chunk),
                            tuple(s.first_row for s in chunk))
    # A running sum of v_r * S_r, read at each segment's last row: the differences of
    # consecutive readings are the segments' D (laid end to end); all of it wraps mod 2**64.
    ends = torch.mul(_row_sums(matrix, ordered), weights).cumsum(0)[last]
    return torch.diff(ends, prepend=_zeros(matrix.device, torch.int64)[:1])


class PendingDigests:
    """Digests whose device work is queued (on the host: done) but not yet read back.

    `parts` are 1-dim int64 tensors of D values; tensor i's D is `parts[p][j]` for
    `slots[i] = (p, j)` (None for a None tensor). Reading back is what makes the host wait for an
    accelerator, so a step's digests are all read in one transfer per device (`HostRead`).
    """

    def __init__(self, tensors: list[Any], ordered: bool, sample: Sample | None) -> None:
        self.salts: list[int | None] = [None if t is None else _salt(t) for t in tensors]
        self.slots: list[tuple[int, int] | None] = [None] * len(tensors)
        self.parts: list[torch.Tensor] = []
        segments = [_Segment.of(index, as_integers(tensor), sample)
                    for index, tensor in enumerate(tensors) if tensor is not None]
        self.sampled = any(segment.sampled for segment in segments)
        groups: dict[tuple[torch.device, torch.dtype], list[_Segment]] = {}
        for segment in segments:
            if segment.ints.numel() >= _alone_from(segment.ints.device):  # without a copy
                self._add_part([segment.index], _segment_sum(segment, ordered))
            else:
                groups.setdefault((segment.ints.device, segment.ints.dtype), []).append(segment)
        for group in groups.values():
            for chunk in _chunks(group):
                self._add_part([s.index for s in chunk], _chunk_sums(chunk, ordered))

    def _add_part(self, indices: list[int], part: torch.Tensor) -> None:
        for position, index in enumerate(indices):
            self.slots[index] = (len(self.parts), position)
        self.parts.append(part)

    def hex_digests(self, values: list[list[int]]) -> list[str | None]:
        """The 16-hex-digit digests, from the values read back for `parts` (in order)."""
        return [
            None if slot is None or salt is None
            else f"{_mix64(values[slot[0]][slot[1]] + salt):016x}"
            for slot, salt in zip(self.slots, self.salts, strict=True)
        ]


def _alone_from(device: torch.device) -> int:
    """Segments of this many elements or more are summed alone, without a copy into a batch.

    On the host an op costs a few microseconds, less than copying 64K elements does: only
    smaller segments are batched. On an accelerator every op is a kernel launch, and copying is
    fast: everything is batched, in chunks that bound the copy's memory.
    """
    return HOST_ALONE_ELEMENTS if on_host(device) else CHUNK_ELEMENTS


def _chunks(group: list[_Segment]) -> list[list[_Segment]]:
    """Consecutive runs of `group` of at most CHUNK_ELEMENTS (padded) elements each."""
    chunks: list[list[_Segment]] = [[]]
    size = 0
    for segment in group:
        if chunks[-1] and size + segment.rows * ROW_ELEMENTS > CHUNK_ELEMENTS:
            chunks.append([])
            size = 0
        chunks[-1].append(segment)
        size += segment.rows * ROW_ELEMENTS
    return [chunk for chunk in chunks if chunk]


def start_digests(tensors: list[Any], *, ordered: bool,
                  sample: Sample | None = None) -> PendingDigests:
    """Queue the ordered or value digests of `tensors` (None stays None)."""
    return PendingDigests(tensors, ordered, sample)


def finish_digests(*pending: PendingDigests) -> list[list[str | None]]:
    """The 16-hex-digit digests of each pending batch, read back now (one transfer per device)."""
    values = HostRead([part for batch in pending for part in batch.parts]).values()
    result, start = [], 0
    for batch in pending:
        result.append(batch.hex_digests(values[start : start + len(batch.parts)]))
        start += len(batch.parts)
    return result


def digest_tensors(tensors: list[Any], *, ordered: bool = True) -> list[str]:
    """One 16-hex-digit digest per tensor, read back now."""
    return [d for d in finish_digests(start_digests(tensors, ordered=ordered))[0] if d is not None]


def combine_digests(digests: list[str]) -> str:
    """One digest of a sequence of digests, order-sensitive (the tensors of a step's inputs)."""
    value = len(digests)
    for digest in digests:
        value = _mix64(value * _ROW_WEIGHT_MULTIPLIER + int(digest, 16))
    return f"{value:016x}"


def _salt(tensor: torch.Tensor) -> int:
    return tensor.numel() * 0x9E3779B97F4A7C15 + tensor.element_size()
