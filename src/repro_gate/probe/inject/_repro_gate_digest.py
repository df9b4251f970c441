"""64-bit digests of tensors' raw bits, computed on the tensor's device with integer arithmetic.

Each element's bits are read as a b-bit signed integer x (b = 8, 16, 32 or 64, the element width)
and the flat tensor is laid out as rows of ROW_ELEMENTS = 256 columns (the last row padded with
zeros). With column weights w_c and odd row weights v_r = M * (2r + 1) (M odd):

    S_r = sum_c w_c * x[r, c]
    D   = sum_r v_r * S_r       (mod 2**64)

and the digest is a fixed bijective mix of D, the element count and the element width.

The column weights w_c are 256 distinct odd numbers below 2**13 in a pseudo-random order
(`ordered_weight_values` of _repro_gate_row_sums), and S_r is exact: an integer below 2**52 in
magnitude for b <= 32, taken modulo 2**64 for b = 64. All arithmetic is integer arithmetic, so the
result does not depend on the order of the additions, nor on how the work is split (below), and
is the same on every device. Every tensor is digested this way: the input batch, which can differ
by order alone, and parameters and gradients too, because a reduction run in another order moves
a few elements of a row by an ULP up and others down, which a plain row sum (w_c = 1) misses
whenever the moves cancel: a gradient that changed would then read as equal, and the divergence
would be blamed on the optimizer.

Guarantees, for a tensor of fewer than 2**39 elements (fewer than 2**31 rows):

- Changing the bits of any single element always changes the digest (w_c and v_r are odd).
- Swapping two elements with different bits in the same column (positions that differ by a
  multiple of 256) always changes it for widths up to 32 bits; for 64-bit elements, unless the
  two values agree in their low 33 bits.
- Swapping two elements with different bits in the same row always changes it for widths up to
  32 bits (the weights are distinct); for 64-bit elements, unless the two values agree in their
  low 52 bits. So does moving one element of a row up by an ULP and another down by one.
- Other changes (a permutation of samples, say) change the digest unless the weighted sums
  cancel exactly. The weights follow no pattern, so data with a structure (values with few
  significant bits, samples whose sums are equal, a linear ramp) does not make that likelier.
  The earlier weights w_c = 2c + 1, summed modulo 2**b, missed about 1 in 330 random orders of
  shards of values k/512 (float32 with 9 significant bits): the sums kept only their top bits.

A *sampled* digest (`Sample(every=K, phase=p)`) of a tensor of R rows (the partial last
row included) sums only the p-th of its K blocks of B = ceil(R / K) consecutive rows, rows
p*B <= r < min((p + 1) * B, R), with the same v_r: the full D is the sum of the K sampled ones.
A block of consecutive rows is read at memory speed, where every K-th row (1 KiB in every K KiB)
was read 4 times slower on CPU. It is taken only of tensors of at least `min_elements` on a host
device (CPU), where a full pass over every parameter and gradient at every step costs more than
the probe's budget; smaller tensors and other devices are digested in full. A change in a
sampled row is always seen; a change in another row is not, at that step.

How the work is split does not change the values. On the host, tensors (or their sampled rows)
of at least HOST_ALONE_ELEMENTS are summed one by one, without a copy (`segment_sum` of
_repro_gate_row_sums), as are those of CHUNK_ELEMENTS on accelerators; an op there costs less
than copying them. Everything else is batched (_repro_gate_batch_sums): the number of ops does
not grow with the number of tensors. The integer arithmetic is in _repro_gate_row_sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import _repro_gate_batch_sums as batching
import torch
from _repro_gate_batch_sums import Member, chunks, layout
from _repro_gate_host_read import HostRead, on_host
from _repro_gate_row_sums import (
    ROW_ELEMENTS,
    ROW_WEIGHT_MULTIPLIER,
    as_integers,
    mix64,
    segment_sum,
)

HOST_ALONE_ELEMENTS = 1 << 16  # on the host, larger segments are summed alone (no copy)


@dataclass(frozen=True)
class Sample:
    """Digest one block in `every`, the `phase`-th, of tensors of at least `min_elements` on a
    host device."""

    every: int
    phase: int
    min_elements: int

    def applies(self, tensor: torch.Tensor) -> bool:
        return self.every > 1 and tensor.numel() >= self.min_elements and on_host(tensor.device)


def sampled_rows(rows: int, sample: Sample | None) -> tuple[int, int]:
    """The rows [start, stop) of a tensor of `rows` rows that `sample` takes (all without)."""
    if sample is None:
        return 0, rows
    block = -(-rows // sample.every)
    start = min(sample.phase * block, rows)
    return start, min(start + block, rows)


def member(index: int, tensor: torch.Tensor, sample: Sample | None) -> tuple[Member, bool]:
    """What is digested of `tensor`: all of it, or its sampled rows (True) as integers."""
    if sample is not None and sample.applies(tensor):
        ints = as_integers(tensor)
        start, stop = sampled_rows(-(-ints.numel() // ROW_ELEMENTS), sample)
        return Member(index, ints[start * ROW_ELEMENTS : stop * ROW_ELEMENTS], start), True
    if tensor.is_complex():  # digested as its real and imaginary parts
        return Member(index, as_integers(tensor), 0), False
    return Member(index, tensor, 0), False


class PendingDigests:
    """Digests whose device work is queued (on the host: done) but not yet read back.

    `parts` are 1-dim int64 tensors of D values; tensor i's D is `parts[p][j]` for
    `slots[i] = (p, j)` (None for a None tensor). Reading back is what makes the host wait for an
    accelerator, so a step's digests are all read in one transfer per device (`HostRead`).
    """

    def __init__(self, tensors: list[Any], sample: Sample | None) -> None:
        plan = _plan(tensors, sample)
        self.salts = plan.salts
        self.slots = list(plan.slots)  # the batched tensors' slots: their parts come first
        self.parts = [batch.sums([tensors[i] for i in indices])
                      for indices, batch in plan.batches]
        self.sampled = False  # True when some tensor's digest is sampled
        groups: dict[tuple[torch.device, torch.dtype], list[Member]] = {}
        for index in plan.singles:
            part, sampled = member(index, tensors[index], sample)
            self.sampled |= sampled
            if part.source.numel() >= _alone_from(part.source.device):
                ints = as_integers(part.source)
                self._add_part([index], segment_sum(ints, part.first_row))
            else:
                groups.setdefault((part.source.device, part.source.dtype), []).append(part)
        for group in groups.values():
            for chunk in chunks(group):
                sums = layout(chunk).sums([m.source for m in chunk])
                self._add_part([m.index for m in chunk], sums)

    def _add_part(self, indices: list[int], part: torch.Tensor) -> None:
        for position, index in enumerate(indices):
            self.slots[index] = (len(self.parts), position)
        self.parts.append(part)

    def hex_digests(self, values: list[list[int]]) -> list[str | None]:
        """The 16-hex-digit digests, from the values read back for `parts` (in order)."""
        return [
            None if slot is None or salt is None
            else f"{mix64(values[slot[0]][slot[1]] + salt):016x}"
            for slot, salt in zip(self.slots, self.salts, strict=True)
        ]


class _Plan:
    """How tensors of one signature (shapes, dtypes, devices) are digested: which are batched,
    in which chunks and layouts, and which are taken one at a time (sampled, complex or large).

    A training digests the same parameters, and gradients of the same shapes, at every step: the
    plan is built once, so a step costs no Python work per batched tensor beyond a list lookup.
    It keeps no reference to the tensors.
    """

    def __init__(self, tensors: list[Any], sample: Sample | None) -> None:
        self.salts: list[int | None] = [None if t is None else _salt(t) for t in tensors]
        self.singles: list[int] = []
        groups: dict[tuple[torch.device, torch.dtype], list[Member]] = {}
        for index, tensor in enumerate(tensors):
            if tensor is None:
                continue
            if (sample is not None and sample.applies(tensor)) or tensor.is_complex() \
                    or tensor.numel() >= _alone_from(tensor.device):
                self.singles.append(index)
            else:
                key = (tensor.device, tensor.dtype)
                groups.setdefault(key, []).append(Member(index, tensor, 0))
        self.batches = [([m.index for m in chunk], layout(chunk))
                        for group in groups.values() for chunk in chunks(group)]
        self.slots: list[tuple[int, int] | None] = [None] * len(tensors)
        for part, (indices, _) in enumerate(self.batches):
            for position, index in enumerate(indices):
                self.slots[index] = (part, position)

    def valid(self) -> bool:
        return all(batch.valid() for _, batch in self.batches)


_SHAPE, _DTYPE, _DEVICE = (attrgetter(name) for name in ("shape", "dtype", "device"))
_MAX_PLANS = 16
_plans: dict[tuple[object, ...], _Plan] = {}


def _plan(tensors: list[Any], sample: Sample | None) -> _Plan:
    """The cached plan for tensors of this signature (built at their first digest)."""
    sampling = None if sample is None else (sample.every, sample.min_elements)
    try:  # at C speed: map() over attribute getters
        key: tuple[object, ...] = (tuple(map(_SHAPE, tensors)), tuple(map(_DTYPE, tensors)),
                                   tuple(map(_DEVICE, tensors)), sampling)
    except AttributeError:  # a None among them (a parameter without a gradient)
        key = (tuple(None if t is None else (t.shape, t.dtype, t.device) for t in tensors),
               sampling)
    plan = _plans.get(key)
    if plan is None or not plan.valid():
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        plan = _plans[key] = _Plan(tensors, sample)
    return plan


def _alone_from(device: torch.device) -> int:
    """Segments of this many elements or more are summed alone, without a copy into a batch.

    On the host an op costs a few microseconds, less than copying 64K elements does: only
    smaller segments are batched. On an accelerator every op is a kernel launch, and copying is
    fast: everything is batched, in chunks that bound the scratch buffer.
    """
    return HOST_ALONE_ELEMENTS if on_host(device) else batching.CHUNK_ELEMENTS


def start_digests(tensors: list[Any], *, sample: Sample | None = None) -> PendingDigests:
    """Queue the digests of `tensors` (None stays None)."""
    return PendingDigests(tensors, sample)


def finish_digests(*pending: PendingDigests) -> list[list[str | None]]:
    """The 16-hex-digit digests of each pending batch, read back now (one transfer per device)."""
    values = HostRead([part for batch in pending for part in batch.parts]).values()
    result, start = [], 0
    for batch in pending:
        result.append(batch.hex_digests(values[start : start + len(batch.parts)]))
        start += len(batch.parts)
    return result


def digest_tensors(tensors: list[Any]) -> list[str]:
    """One 16-hex-digit digest per tensor, read back now."""
    return [d for d in finish_digests(start_digests(tensors))[0] if d is not None]


def combine_digests(digests: list[str]) -> str:
    """One digest of a sequence of digests, order-sensitive (the tensors of a step's inputs)."""
    value = len(digests)
    for digest in digests:
        value = mix64(value * ROW_WEIGHT_MULTIPLIER + int(digest, 16))
    return f"{value:016x}"


def _salt(tensor: torch.Tensor) -> int:
    return tensor.numel() * ROW_WEIGHT_MULTIPLIER + tensor.element_size()
