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


def ordered_weights() -> list[int]:
    """w_c of the digest as documented: the first 256 distinct values of
    2 * (splitmix64(i * M) >> 52) + 1, i = 1, 2, ..."""
    weights: list[int] = []
    index = 0
    while len(weights) < 256:
        index += 1
        weight = 2 * (splitmix64(index * ROW_MULTIPLIER) >> 52) + 1
        if weight not in weights:
            weights.append(weight)
    return weights


ORDERED_WEIGHTS = ordered_weights()


def weighted(row: list[int]) -> int:
    """The exact row sum of a row of up to 256 integers."""
    return sum(w * x for w, x in zip(ORDERED_WEIGHTS[: len(row)], row, strict=True))


def row_total(tensor, every: int = 1, phase: int = 0) -> int:
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
        row_sum = signed(weighted(values[start : start + 256]), 64)  # modulo 2**64 for int64
        total += ROW_MULTIPLIER * (2 * row + 1) * row_sum
    return total


def expected(tensor, every: int = 1, phase: int = 0) -> str:
    salt = tensor.numel() * ROW_MULTIPLIER + tensor.element_size()
    return f"{splitmix64(signed(row_total(tensor, every, phase), 64) + salt):016x}"


def sample_tensors() -> list:
    generator = torch.Generator().manual_seed(7)
    return [
        torch.randn(3, 700, generator=generator),  # float32, a partial last row
        torch.randn(1000, generator=generator).to(torch.bfloat16),
        torch.randn(600, generator=generator, dtype=torch.float64),
        torch.randint(-128, 128, (900,), generator=generator, dtype=torch.int8),
        torch.randint(-(2**62), 2**62, (700,), generator=generator),  # int64: sums wrap
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
    wanted = [expected(t) for t in tensors]
    assert digest.digest_tensors(tensors) == wanted
    with monkeypatch.context() as patch:
        # The accelerators' path (batched, copied back asynchronously), taken here on CPU.
        patch.setattr(host_read, "HOST_DEVICE_TYPES", frozenset())
        assert digest.digest_tensors(tensors) == wanted
        patch.setattr(batching, "CHUNK_ELEMENTS", 1024)  # several chunks, one tensor alone
        assert digest.digest_tensors(tensors) == wanted
    with monkeypatch.context() as patch:
        patch.setattr(row_sums, "WIDEN_BLOCK_ROWS", 2)  # rows widened in blocks
        patch.setattr(row_sums, "DEVICE_WIDEN_BLOCK_ROWS", 3)
        assert digest.digest_tensors(tensors) == wanted

    # Row sums on accelerators (int64 products) equal the CPU's exact float64 ones, at
    # the extremes of every width up to 32 bits and in the partial last row.
    generator = torch.Generator().manual_seed(8)
    int64_weights = row_sums.ordered_column_weights(torch.device("cpu"), torch.int64)
    float64_weights = row_sums.ordered_column_weights(torch.device("cpu"), torch.float64)
    for dtype in (torch.int8, torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        rows = torch.randint(info.min, info.max, (64, 256), generator=generator, dtype=dtype)
        rows[0], rows[1] = info.min, info.max
        for columns, block in ((256, 64), (100, 5)):
            monkeypatch.setattr(row_sums, "WIDEN_BLOCK_ROWS", block)  # one block, then many
            monkeypatch.setattr(row_sums, "DEVICE_WIDEN_BLOCK_ROWS", block)
            part = rows[:, :columns]
            exact = [weighted(row) for row in part.tolist()]
            assert row_sums.row_sums_exact_int64(part, int64_weights[:columns]).tolist() == exact
            assert row_sums.row_sums_exact_float64(part, float64_weights[:columns]).tolist() \
                == exact


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
        pending = digest.start_digests([large, small], sample=sample)
        assert pending.sampled
        assert digest.finish_digests(pending)[0] == [
            expected(large, every, phase), expected(small)  # small: in full
        ]
        part, sampled = digest.member(0, large, sample)
        assert sampled
        ints = row_sums.as_integers(part.source)
        sums.append(row_sums.segment_sum(ints, part.first_row).item())
    # The K samples add up to the full digest's sum: every row is in exactly one of them.
    assert sum(sums) & MASK == row_total(large) & MASK

    # A change in one element is seen at the step whose sample holds its row, and at no other.
    changed = large.clone()
    changed.view(torch.int32)[200 * 256 + 3] ^= 1  # row 200, in the 6th block of 38 rows
    seen = []
    for phase in range(every):
        sample = digest.Sample(every, phase, min_elements=4096)
        before, after = digest.finish_digests(
            digest.start_digests([large], sample=sample),
            digest.start_digests([changed], sample=sample),
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
    for first, second in ((10, 11), (20, 275)):  # one ULP up and one down: same row, then not
        moved = base.clone()
        moved.view(torch.int32)[first] += 1
        moved.view(torch.int32)[second] -= 1
        variants.append(moved)
    base_digest, *digests = digest.digest_tensors([base, *variants])
    # All differ: a value and its negation swapped in a row, and a reduction's typical change,
    # ULPs that cancel in a plain row sum, too.
    assert len({base_digest, *digests}) == len(digests) + 1


def test_digest_tells_apart_shuffles_of_data_with_few_significant_bits(
    probe_module: Callable[[str], ModuleType],
) -> None:
    """Shards of values k/512 (9 significant bits: the low 14 bits of each float32 are zero) in
    a random order: every batch with other contents or another order has another digest. With
    the earlier weights 2c + 1 summed modulo 2**32, about 1 order in 330 collided."""
    digest = probe_module("_repro_gate_digest")
    shards = torch.arange(64 * 8, dtype=torch.float32).reshape(16, 4, 8) / 512
    generator = torch.Generator().manual_seed(11)
    batches = {}
    for _ in range(3000):
        order = torch.randperm(16, generator=generator)[:4].tolist()
        batches[tuple(order)] = torch.cat([shards[i] for i in order])
    digests = digest.digest_tensors(list(batches.values()))
    assert len(set(digests)) == len(batches)
    # Equal-sum blocks (each a permutation of the same values), reordered: all differ too.
    block = torch.arange(32, dtype=torch.float32) / 512
    permuted = [block[torch.randperm(32, generator=generator)] for _ in range(8)]
    orders = {tuple(torch.randperm(8, generator=generator).tolist()) for _ in range(500)}
    reordered = [torch.cat([permuted[i] for i in order]) for order in orders]
    assert len(set(digest.digest_tensors(reordered))) == len(orders)
