"""The optimizer step hooks' record on the accelerators' path: a fixed number of ops whatever the
number of parameter tensors, no host synchronisation but the lagged read, and exact values.

No GPU here: the hooks run on the "meta" device, where every op is dispatched and none has data,
so any read of a device value (`.item()`, `.tolist()`, `.cpu()`) would fail or be logged; the
one copy to the host is logged (and skipped: meta has no data). A second test runs the same path
on CPU tensors with CPU treated as an accelerator, for the values.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

aten = torch.ops.aten
HOST_READS = {aten._local_scalar_dense.default, aten.item.default}


class OpLog(TorchDispatchMode):
    """The ops dispatched: those that run kernels (views launch none), host reads, transfers."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[str] = []
        self.host_reads: list[str] = []
        self.transfers: list[bool] = []  # non_blocking of each device-to-host copy

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in HOST_READS or _to_host(func, args, kwargs):
            self.host_reads.append(str(func))
        if func is aten.copy_.default and args[0].device.type == "cpu" \
                and args[1].device.type != "cpu":
            self.transfers.append(bool(args[2] if len(args) > 2 else kwargs.get("non_blocking")))
            return args[0]  # a meta tensor has no data to copy
        if not func.is_view:
            self.kernels.append(str(func))
        return func(*args, **kwargs)


def _to_host(func: Any, args: Any, kwargs: Any) -> bool:
    device = kwargs.get("device")
    return (func is aten._to_copy.default and device is not None
            and torch.device(device).type == "cpu" and args[0].device.type != "cpu")


def train_with_recorder(probe_module: Callable[[str], ModuleType], layers: int,
                        device: str) -> tuple[list[OpLog], list[list[dict]], list[dict]]:
    """Three SGD steps of `layers` Linear layers (2 tensors each), the hooks' ops logged; the
    records each step completed, and those the end of the run flushed."""
    steps = probe_module("_repro_gate_steps")
    step_inputs = probe_module("_repro_gate_step_inputs")
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the layers' initialisation
    with torch.device(device):
        model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(layers)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    errors: list[str] = []
    inputs = step_inputs.StepInputs(torch, errors.append)
    recorder = steps.StepRecorder(inputs)
    named = list(model.named_parameters())
    logs, completed = [], []
    for step in (1, 2, 3):
        batch = torch.randn(4, 8, generator=generator).to(device)
        output = model(batch)
        inputs.on_root_call(model, (batch,), {}, output)  # as the probe's global hooks do
        loss = output.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        log = OpLog()
        with log:
            recorder.before_step(optimizer, named, step)
        optimizer.step()
        with log:
            header = {"step": step, "time": 0.0}
            completed.append(recorder.after_step(optimizer, named, header, loss.detach()))
        logs.append(log)
    assert errors == []
    return logs, completed, recorder.flush()


def test_step_hooks_dispatch_a_fixed_number_of_ops_and_never_wait_for_the_device(
    probe_module: Callable[[str], ModuleType],
) -> None:
    kernels = {}
    for layers in (5, 100):  # 10 and 200 parameter tensors
        logs, completed, flushed = train_with_recorder(probe_module, layers, "meta")
        for log in logs:
            assert log.host_reads == []
            assert log.transfers == [True]  # one asynchronous copy per step, nothing else
        assert logs[1].kernels == logs[2].kernels  # after step 1 (initial parameters, caches)
        kernels[layers] = logs[1].kernels
        # Each step's record is completed at the next step, the last one when the run ends.
        assert [[r["step"] for r in records] for records in completed] == [[], [1], [2]]
        assert [r["step"] for r in flushed] == [3]
        records = [records[0] for records in completed[1:]] + flushed
        assert all(len(r["params"]) == len(r["grads"]) == 2 * layers for r in records)
        assert "init" in records[0] and "init" not in records[1]
        assert all(None not in (r["inputs"], r["outputs"], r["loss"]) for r in records)
    assert kernels[5] == kernels[100]
    # 10 per digest set (the weighted row sums widen each row to int64 and weigh it), then the
    # loss and the transfer
    assert len(kernels[5]) <= 23, kernels[5]


def test_records_read_back_lagged_are_those_read_at_once(
    probe_module: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, completed, flushed = train_with_recorder(probe_module, 3, "cpu")
    at_once = [records[0] for records in completed] + flushed
    assert [r["step"] for r in at_once] == [1, 2, 3] and flushed == []
    host_read = probe_module("_repro_gate_host_read")
    monkeypatch.setattr(host_read, "HOST_DEVICE_TYPES", frozenset())  # CPU as an accelerator
    _, completed, flushed = train_with_recorder(probe_module, 3, "cpu")
    lagged = [records[0] for records in completed[1:]] + flushed
    assert lagged == at_once
