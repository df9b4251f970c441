"""The probe's digest: its documented formula, its sampled form, and the same values whichever way
the work is split (one tensor at a time on the host, batched on accelerators)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

MASK = (1 << 64) - 1
ROW_MULTIPLIER = 0x9E3779B97F4A7C15


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def splitmix64(value: int) -> int:
    value &= MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK
    return value ^ (value >> 31)


def row_total(tensor, ordered: bool = True, every: int = 1, phase: int = 0) -> int:
    """D of the module docstring, in Python integers, over the phase-th of `every` blocks of
    ceil(rows / every) consecutive rows."""
    width = tensor.element_size()
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
    values = tensor.contiguous().reshape(-1).view(ints).tolist()
    block = -(-len(range(0, len(values), 256)) // every)
    total = 0
    for row, start in enumerate(range(0, len(values), 256)):
        if row // block != phase:
            continue
        row_values = values[start : start + 256]
        weighted = (((2 * c + 1) if ordered else 1) * x for c, x in enumerate(row_values))
        total += ROW_MULTIPLIER * (2 * row + 1) * signed(sum(weighted), 8 * width)
    return total


def expected(tensor, ordered: bool = True, every: int = 1, phase: int = 0) -> str:
    salt = tensor.numel() * ROW_MULTIPLIER + tensor.element_size()
    return f"{splitmix64(signed(row_total(tensor, ordered, every, phase), 64) + salt):016x}"


def sample_tensors() -> list:
    generator = torch.Generator().manual_seed(7)
    return [
        torch.randn(3, 700, generator=generator),  # float32, a partial last row
        torch.randn(1000, generator=generator).to(torch.bfloat16),
        torch.randn(600, generator=generator, dtype=torch.float64),
        torch.randint(-128, 128, (900,), generator=generator, dtype=torch.int8),
        torch.randn(40, 30, generator=generator).t(),  # not contiguous
        torch.randn(5, generator=generator),  # shorter than one row
        torch.zeros(0),  # empty
        torch.randn(300, 301, generator=generator),  # large: summed alone on the host
    ]


def test_digest_follows_its_documented_formula_on_every_path(
    probe_module: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = probe_module("_repro_gate_digest")
    host_read = probe_module("_repro_gate_host_read")
    batching = probe_module("_repro_gate_batch_sums")
    row_sums = probe_module("_repro_gate_row_sums")
    tensors = sample_tensors()
    for ordered in (True, False):
        wanted = [expected(t, ordered) for t in tensors]
        assert digest.digest_tensors(tensors, ordered=ordered) == wanted
        with monkeypatch.context() as patch:
            # The accelerators' path (batched, copied back asynchronously), taken here on CPU.
            patch.setattr(host_read, "HOST_DEVICE_TYPES", frozenset())
            assert digest.digest_tensors(tensors, ordered=ordered) == wanted
            patch.setattr(batching, "CHUNK_ELEMENTS", 1024)  # several chunks, one tensor alone
            assert digest.digest_tensors(tensors, ordered=ordered) == wanted

    # The path taken on accelerators (multiply and row sum) gives the same row sums as the
    # matrix product used on CPU, wrapping included.
    generator = torch.Generator().manual_seed(8)
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
        info = torch.iinfo(dtype)
        rows = torch.randint(info.min, info.max, (64, 256), generator=generator, dtype=dtype)
        weights = row_sums.column_weights(rows.device, dtype)
        assert torch.equal(
            row_sums.row_sums_elementwise(rows, weights), row_sums.row_sums_matmul(rows, weights)
        )


def test_sampled_digest_covers_every_row_within_k_steps(
    probe_module: Callable[[str], ModuleType],
) -> None:
    digest = probe_module("_repro_gate_digest")
    row_sums = probe_module("_repro_gate_row_sums")
    generator = torch.Generator().manual_seed(9)
    large = torch.randn(300 * 256 + 17, generator=generator)  # 301 rows (the last partial)
    small = torch.randn(1000, generator=generator)
    every = 8
    sums = []
    for phase in range(every):
        sample = digest.Sample(every, phase, min_elements=4096)
        pending = digest.start_digests([large, small], ordered=False, sample=sample)
        assert pending.sampled
        assert digest.finish_digests(pending)[0] == [
            expected(large, False, every, phase), expected(small, False)  # small: in full
        ]
        part, sampled = digest.member(0, large, sample)
        assert sampled
        ints = row_sums.as_integers(part.source)
        sums.append(row_sums.segment_sum(ints, part.first_row, False).item())
    # The K samples add up to the full digest's sum: every row is in exactly one of them.
    assert sum(sums) & MASK == row_total(large, False) & MASK

    # A change in one element is seen at the step whose sample holds its row, and at no other.
    changed = large.clone()
    changed.view(torch.int32)[200 * 256 + 3] ^= 1  # row 200, in the 6th block of 38 rows
    seen = []
    for phase in range(every):
        sample = digest.Sample(every, phase, min_elements=4096)
        before, after = digest.finish_digests(
            digest.start_digests([large], ordered=False, sample=sample),
            digest.start_digests([changed], ordered=False, sample=sample),
        )
        seen.append(before != after)
    assert seen == [phase == 5 for phase in range(every)]


def test_digest_guarantees_on_swaps_and_single_bits(
    probe_module: Callable[[str], ModuleType],
) -> None:
    digest = probe_module("_repro_gate_digest")
    generator = torch.Generator().manual_seed(7)
    base = torch.randn(2048, generator=generator)
    base[[1, 3]] = torch.tensor([1.5, -1.5])
    variants = []
    for first, second in ((300, 301), (5, 5 + 3 * 256), (7, 7 + 5 * 256 + 9), (1, 3)):
        swapped = base.clone()  # same row, same column, neither, then x and -x in one row
        swapped[[first, second]] = base[[second, first]]
        variants.append(swapped)
    changed = base.clone()
    changed.view(torch.int32)[1234] ^= 1  # lowest mantissa bit of one element
    variants.append(changed)
    base_digest, *digests = digest.digest_tensors([base, *variants])
    # All differ, except the documented blind spot: a value and its negation swapped in a row.
    assert digests[3] == base_digest
    del digests[3]
    assert len({base_digest, *digests}) == len(digests) + 1
    # The value digest misses swaps within a row (the first and last variants), no other.
    base_value, *values = digest.digest_tensors([base, *variants], ordered=False)
    assert [value == base_value for value in values] == [True, False, False, True, False]
