"""D of many tensors in a fixed number of ops, whatever their number (the digest's batched path).

On an accelerator every op is a kernel launch, and on any device every op dispatched from Python
costs microseconds: a model of hundreds of parameter tensors must not pay several per tensor.
So the members of a batch (tensors, or sampled segments of them, of one device and dtype) are
copied by one `_foreach_copy_` into a scratch buffer where each starts a row of ROW_ELEMENTS,
the padding after each is zeroed by one `_foreach_zero_`, and the buffer, read as integer rows,
gives the row sums S_r; their products with v_r (r counted within each member's own tensor),
a running sum read at each member's last row, and the differences of those readings give every
member's D, all modulo 2**64: the same values as one tensor at a time. The copy is of values of
the members' own type, bit for bit (on some devices a NaN's payload may come out quieted).

The views into the scratch buffer, the padding and the row weights of a layout (the members'
shapes and first rows) are built once and cached. A batch is split into chunks of at most
CHUNK_ELEMENTS, which bounds the scratch buffer: one per device and dtype, shared by every
batch, which is safe because each batch's ops are queued in order on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from _repro_gate_row_sums import ROW_ELEMENTS, integer_dtype, row_sums, row_weights

CHUNK_ELEMENTS = 1 << 25  # the scratch buffer: 128 MiB of float32 at most
_MAX_LAYOUTS = 128  # cached layouts: one per sampling phase (grads and params share them)


@dataclass(frozen=True)
class Member:
    """One tensor of a batch, or the segment of it that is digested."""

    index: int  # its position in the caller's list
    source: torch.Tensor  # any shape; read as values of its own dtype
    first_row: int  # the row of its tensor where `source` starts (its r in v_r)


def rows_of(source: torch.Tensor) -> int:
    """A member's rows in the buffer: an empty one takes a row of zeros (its D is 0)."""
    return max(1, -(-source.numel() // ROW_ELEMENTS))


class Layout:
    """Where a chunk's members go in the scratch buffer, and their rows' weights; built once for
    members of these shapes and first rows, then reused at every step."""

    def __init__(self, chunk: list[Member]) -> None:
        source = chunk[0].source
        self.key = (source.device, source.dtype)
        rows = [rows_of(member.source) for member in chunk]
        size = (1 + sum(rows)) * ROW_ELEMENTS
        self.buffer = _scratch_buffer(source.device, source.dtype, size)
        self.views: list[torch.Tensor] = []  # where each member is copied, shaped like it
        # Row 0 stays zero, so that the running sum is 0 there; then the rest of each member's
        # last row.
        self.pads: list[torch.Tensor] = [self.buffer[:ROW_ELEMENTS]]
        offset = ROW_ELEMENTS
        for member, count in zip(chunk, rows, strict=True):
            elements = member.source.numel()
            self.views.append(self.buffer[offset : offset + elements].view(member.source.shape))
            if count * ROW_ELEMENTS > elements:
                self.pads.append(self.buffer[offset + elements : offset + count * ROW_ELEMENTS])
            offset += count * ROW_ELEMENTS
        spans = [(m.first_row, m.first_row + count) for m, count in zip(chunk, rows, strict=True)]
        local = torch.cat([torch.arange(start, stop) for start, stop in spans])
        weights = row_weights(torch.device("cpu"), max(stop for _, stop in spans))[local]
        # v_r of each row (any for row 0, which is zero)
        self.weights = _to_device(torch.cat([weights[:1], weights]), source.device)
        ends = torch.tensor(rows).cumsum(0)
        self.last = _to_device(ends, source.device)  # each member's last row
        self.before = _to_device(ends - torch.tensor(rows), source.device)  # the row before it
        self.matrix = self.buffer[:size].view(integer_dtype(source.dtype)).view(-1, ROW_ELEMENTS)

    def valid(self) -> bool:
        """False once its scratch buffer was replaced by a larger one."""
        return _scratch.get(self.key) is self.buffer

    def sums(self, sources: list[torch.Tensor]) -> torch.Tensor:
        """D of each of `sources` (the members' tensors now), as a 1-dim int64 tensor."""
        with torch.no_grad():
            if self.pads:
                torch._foreach_zero_(self.pads)
            torch._foreach_copy_(self.views, sources)
        # The running sum at a member's last row less the one at the row before its first: D.
        running = torch.mul(row_sums(self.matrix), self.weights).cumsum(0)
        return torch.sub(running[self.last], running[self.before])


_scratch: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_layouts: dict[tuple[object, ...], Layout] = {}


def chunks(members: list[Member]) -> list[list[Member]]:
    """Consecutive runs of `members` of at most CHUNK_ELEMENTS (padded) elements each."""
    runs: list[list[Member]] = [[]]
    size = 0
    for member in members:
        padded = rows_of(member.source) * ROW_ELEMENTS
        if runs[-1] and size + padded > CHUNK_ELEMENTS:
            runs.append([])
            size = 0
        runs[-1].append(member)
        size += padded
    return [run for run in runs if run]


def layout(chunk: list[Member]) -> Layout:
    """The layout of `chunk` (one device, one dtype), cached by the members' shapes."""
    source = chunk[0].source
    key = (source.device, source.dtype,
           tuple((member.source.shape, member.first_row) for member in chunk))
    found = _layouts.get(key)
    if found is None or not found.valid():
        if len(_layouts) >= _MAX_LAYOUTS:
            _layouts.clear()
        found = _layouts[key] = Layout(chunk)
    return found


def _scratch_buffer(device: torch.device, dtype: torch.dtype, size: int) -> torch.Tensor:
    """The scratch buffer of `device` and `dtype`, of at least `size` elements."""
    buffer = _scratch.get((device, dtype))
    if buffer is None or buffer.numel() < size:
        buffer = torch.zeros(1 << (size - 1).bit_length(), dtype=dtype, device=device)
        _scratch[(device, dtype)] = buffer
    return buffer


def _to_device(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host values copied to `device` without waiting: a copy from pageable memory to a CUDA
    device waits for the device's queue; from pinned memory it does not (a batch of a new shape
    needs a new layout, which must not stall the step)."""
    if device.type == "cuda":
        return values.pin_memory().to(device, non_blocking=True)
    return values.to(device)
