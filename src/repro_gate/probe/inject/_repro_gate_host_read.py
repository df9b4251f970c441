"""A step's digests read back to the host without making it wait for an accelerator.

Reading a value computed on an accelerator (`.item()`, `.tolist()`, `.cpu()`) blocks the host
until the device has run everything queued before it, which stalls the training's pipeline at
every step. Instead, the step's values (int64 parts) are concatenated on each device, copied
with `non_blocking=True` into host memory (pinned on CUDA, so the copy is truly asynchronous),
and an event is recorded after the copy. They are read at the next step's hook, or when the run
ends: the device has long finished by then, so waiting on the event costs nothing. Values on a
host device (CPU) are ready at once and read at once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# Devices whose ops run synchronously with the host: their values are read at once (and the
# digest sums their large tensors one by one). Every other device is an accelerator.
HOST_DEVICE_TYPES = frozenset({"cpu"})


def on_host(device: torch.device) -> bool:
    return device.type in HOST_DEVICE_TYPES


class HostRead:
    """The values of `parts` (1-dim int64 tensors), on their way to the host."""

    def __init__(self, parts: list[torch.Tensor]) -> None:
        self._sizes = [part.numel() for part in parts]
        by_device: dict[torch.device, list[int]] = {}
        for index, part in enumerate(parts):
            by_device.setdefault(part.device, []).append(index)
        self._order = [index for indices in by_device.values() for index in indices]
        self._host: list[torch.Tensor] = []
        self._waits: list[Callable[[], object]] = []
        self.lagged = False  # True when a device's values are still being copied
        for device, indices in by_device.items():
            values = torch.cat([parts[index] for index in indices])
            if on_host(device):
                self._host.append(values)
                continue
            self.lagged = True
            self._host.append(self._start_copy(values))

    def _start_copy(self, values: torch.Tensor) -> torch.Tensor:
        device = values.device
        host = torch.empty(values.shape, dtype=values.dtype, pin_memory=device.type == "cuda")
        host.copy_(values, non_blocking=True)
        self._waits.append(_completion(device))
        return host

    def values(self) -> list[list[int]]:
        """The values of each part, in the order given (waits for the copies: the lagged read)."""
        for wait in self._waits:
            wait()
        self._waits = []
        flat = [value for host in self._host for value in host.tolist()]
        by_index: dict[int, list[int]] = {}
        start = 0
        for index in self._order:
            by_index[index] = flat[start : start + self._sizes[index]]
            start += self._sizes[index]
        return [by_index[index] for index in range(len(self._sizes))]


def _completion(device: torch.device) -> Callable[[], object]:
    """A callable that waits until the work queued on `device` so far (the copy) is done."""
    if device.type == "cuda":
        cuda_event = torch.cuda.Event()
        cuda_event.record(torch.cuda.current_stream(device))
        return cuda_event.synchronize
    try:
        event = torch.Event(device=device.type)
        event.record()
        return event.synchronize
    except Exception:  # a backend without events: wait for the whole device, a step later
        backend = getattr(torch, device.type, None)
        synchronize = getattr(backend, "synchronize", None)
        return synchronize if callable(synchronize) else _nothing


def _nothing() -> None:
    return None
