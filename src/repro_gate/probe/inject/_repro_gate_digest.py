"""64-bit digests of tensors' raw bits, computed on the tensor's device with integer arithmetic.

Each element's bits are read as a signed integer of the same width, widened to int64, multiplied
by an odd weight that depends on its position, and summed with wrapping int64 arithmetic.
Integer sums do not depend on the order of the additions, so the digest is deterministic on any
device. Multiplying by an odd number is a bijection modulo 2**64, so changing any bits of a single
element always changes the digest.
"""

from __future__ import annotations

from typing import Any

import torch

# Elements are processed in chunks so that the cached weights and the int64 temporaries stay small.
CHUNK_ELEMENTS = 1 << 22
_MASK64 = (1 << 64) - 1
_INT_BY_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_weights_by_device: dict[torch.device, torch.Tensor] = {}


def _signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _mix64(value: int) -> int:
    """splitmix64 finaliser: spreads the bits of a 64-bit value (cosmetic, a bijection)."""
    value &= _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def _position_weights(device: torch.device) -> torch.Tensor:
    """Odd, position-dependent int64 weights for one chunk, cached per device."""
    weights = _weights_by_device.get(device)
    if weights is None:
        weights = torch.arange(CHUNK_ELEMENTS, dtype=torch.int64, device=device)
        weights.mul_(_signed64(0x9E3779B97F4A7C15)).add_(_signed64(0x632BE59BD9B4E019))
        weights.bitwise_xor_(weights >> 29).bitwise_or_(1)
        _weights_by_device[device] = weights
    return weights


def _as_integers(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as a flat tensor of same-width signed integers."""
    data = tensor.detach()
    if data.is_complex():
        data = torch.view_as_real(data)
    flat = data.contiguous().reshape(-1)
    return flat.view(_INT_BY_WIDTH[flat.element_size()])


def _device_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The wrapped int64 sum for one tensor, as a 0-dim tensor on its device (no host sync)."""
    ints = _as_integers(tensor)
    weights = _position_weights(ints.device)
    total = torch.zeros((), dtype=torch.int64, device=ints.device)
    for chunk_index, start in enumerate(range(0, ints.numel(), CHUNK_ELEMENTS)):
        part = ints[start : start + CHUNK_ELEMENTS].to(torch.int64, copy=True)
        part.mul_(weights[: part.numel()])
        chunk_sum = part.sum()
        if chunk_index:
            chunk_sum = chunk_sum * _signed64((2 * chunk_index + 1) * 0xD6E8FEB86659FD93)
        total += chunk_sum
    return total


def digest_tensors(tensors: list[Any]) -> list[str]:
    """One 16-hex-digit digest per tensor, with one host transfer per device."""
    sums: list[int | None] = [None] * len(tensors)
    by_device: dict[torch.device, list[int]] = {}
    for index, tensor in enumerate(tensors):
        by_device.setdefault(tensor.device, []).append(index)
    for indices in by_device.values():
        values = torch.stack([_device_sum(tensors[i]) for i in indices]).tolist()
        for position, index in enumerate(indices):
            sums[index] = values[position]
    digests = []
    for index, tensor in enumerate(tensors):
        value = sums[index]
        assert value is not None
        salt = tensor.numel() * 0x9E3779B97F4A7C15 + tensor.element_size()
        digests.append(f"{_mix64(value + salt):016x}")
    return digests
