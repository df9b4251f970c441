"""Per-step cost of the repro-gate probe on a model of more than 10M parameters.

Runs the same training (a 10.5M-parameter MLP, Adam, batch 256 by default; with --layers N, a
stack of N Linear(W, W) layers instead, W = --deep-width, 512 by default: 2N + 2 parameter
tensors) in fresh processes without and
with the probe (default mode: it only observes), interleaved, several times, and prints as JSON
the medians of the mean step times and, measured in the worker after training, on its model:

- record_seconds: the probe's step record as it takes it (gradients before the update,
  parameters after it, the input batch, the model's output, the loss; on CPU, large tensors
  sampled 1 row in K);
- record_seconds_by_every: the same with 1/k of each large tensor sampled, for k = 1 (whole),
  4, 16, 32, 64: what K is chosen from (see docs/performance.md);
- params_only_seconds: as the reference in the same process, the earlier probe's record (the
  parameters' ordered digests only, whole);

and the machine's load average. With --resume-records, the probe-on runs also record the state
each step begins with (REPRO_GATE_RESUME_RECORDS=1, the resume check's runs A and R), and the
worker times that record as the probe takes it (`resume_record_seconds`: the step's first
forward pre-hook, the optimizer step pre-hook and the line written at its post-hook), as a share
of the probe-off step (`resume_record_pct`) and against the step record in the same process
(`resume_over_record`). On a GPU (--device cuda) the record is timed with the device
synchronised after the last call, so its device time counts, and host_seconds is the time the
hooks themselves take on the host (they never wait for the device). With --as-accelerator the
records are timed on CPU as the probe takes them on an accelerator (batched, copied back
asynchronously, not sampled): with tiny layers, what remains is the hooks' Python work per tensor.
Usage: python bench/probe_overhead.py [--repeats 5] [--steps 20] [--batch-size 256]
       [--device cpu|cuda] [--layers N] [--deep-width W] [--as-accelerator] [--resume-records]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

INJECT_DIR = Path(__file__).resolve().parents[1] / "src" / "repro_gate" / "probe" / "inject"
WARMUP_STEPS = 3
WIDTH = 1024
HIDDEN = 4608
DEEP_WIDTH = 512
EVERY = (1, 4, 16, 32, 64)
WARMUP_RECORDS = 64  # as many as the largest k: every sampling phase seen once
MODEL = f"MLP {WIDTH}-{HIDDEN}-{WIDTH}-{WIDTH}-1 (Linear+ReLU), fp32, Adam lr 1e-4, MSE loss"


def build_model(layers: int, width: int = DEEP_WIDTH) -> Any:
    from torch import nn

    if layers:
        blocks = [module for _ in range(layers) for module in (nn.Linear(width, width), nn.ReLU())]
        return nn.Sequential(*blocks, nn.Linear(width, 1))
    return nn.Sequential(
        nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, WIDTH), nn.ReLU(),
        nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1),
    )


def worker(args: argparse.Namespace) -> None:
    """Train the model and print the mean seconds per step (the probe is active if injected)."""
    import torch
    from torch import nn

    steps, device = args.steps, args.device
    model = build_model(args.layers, args.deep_width).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = torch.randn(args.batch_size, args.deep_width if args.layers else WIDTH, device=device)
    target = torch.randn(args.batch_size, 1, device=device)
    started = 0.0
    loss = None
    for step in range(WARMUP_STEPS + steps):
        if step == WARMUP_STEPS:
            _synchronize(torch, device)
            started = time.perf_counter()
        loss = nn.functional.mse_loss(model(data), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    _synchronize(torch, device)
    step_seconds = (time.perf_counter() - started) / steps
    # The probe's recordings alone, in this process, on the trained model (its gradients are
    # still there): measured without noise from the other process.
    sys.path.insert(0, str(INJECT_DIR))
    import _repro_gate_host_read
    from _repro_gate_digest import finish_digests, start_digests

    if args.as_accelerator:
        _repro_gate_host_read.HOST_DEVICE_TYPES = frozenset()

    named = list(model.named_parameters())

    def params_only() -> None:  # the earlier probe: the parameters' ordered digests only
        finish_digests(start_digests([param for _, param in named]))

    output = model(data).detach()
    by_every = {every: _record_timer(optimizer, named, (data, output), loss, every)
                for every in EVERY}
    record = _record_timer(optimizer, named, (data, output), loss, None)
    resume: dict[str, Any] = {}
    if args.resume_records:
        with tempfile.TemporaryDirectory() as out_dir:
            timer, errors = _resume_record_timer(model, optimizer, out_dir)
            resume = {"resume_record_seconds": _time_per_call(timer, steps, torch, device),
                      "resume_record_errors": errors}
    print(json.dumps({
        **resume,
        "params": sum(p.numel() for p in model.parameters()),
        "tensors": len(named),
        "step_seconds": step_seconds,
        "params_only_seconds": _time_per_call(params_only, steps, torch, device),
        "record_seconds": _time_per_call(record, steps, torch, device),
        "host_seconds": _time_per_call(record, steps, torch, device, wait=False),
        "record_seconds_by_every": {
            str(every): _time_per_call(timer, steps, torch, device)
            for every, timer in by_every.items()
        },
        "threads": torch.get_num_threads(),
    }))


def _record_timer(optimizer: Any, named: list, call: tuple[Any, Any], loss: Any,
                  every: int | None) -> Callable[[], None]:
    """One step's record, as the probe's hooks take it (K as the probe has it when None)."""
    from _repro_gate_digest import start_digests
    from _repro_gate_steps import StepRecorder

    data, output = call

    class BatchInputs:  # the model's input batch and output, digested as the global hooks do
        def take(self) -> list:
            return [start_digests([data])]

        def take_outputs(self) -> list:
            return [start_digests([output])]

    recorder = StepRecorder(BatchInputs()) if every is None else StepRecorder(BatchInputs(), every)
    counter = [0]

    def record() -> None:
        counter[0] += 1
        recorder.before_step(optimizer, named, counter[0])
        header = {"step": counter[0], "time": 0.0}
        recorder.after_step(optimizer, named, header, loss)

    return record


def _resume_record_timer(model: Any, optimizer: Any,
                         out_dir: str) -> tuple[Callable[[], None], list[str]]:
    """One step's resume record as the probe takes it; the errors it reported."""
    from _repro_gate_resume_state import ResumeRecords

    errors: list[str] = []
    completed = [0]
    records = ResumeRecords(out_dir, lambda: completed[0], False, errors.append)

    def record() -> None:
        records.on_root_start(model)  # the step's first forward
        records.before_step(optimizer, completed[0] + 1)  # its optimizer step's pre-hook
        completed[0] += 1
        records.after_step(0)  # its post-hook: the line written

    return record, errors


def _synchronize(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time_per_call(function: Callable[[], None], calls: int, torch: Any, device: str,
                   wait: bool = True) -> float:
    """Mean seconds per call, the device's queued work included unless not `wait`.

    Warmed up over WARMUP_RECORDS calls first: a training's record reaches its steady state
    once every sampling phase has been seen (its layouts are built once, then cached)."""
    for _ in range(WARMUP_RECORDS):
        function()
    _synchronize(torch, device)
    started = time.perf_counter()
    for _ in range(calls):
        function()
    if wait:
        _synchronize(torch, device)
    return (time.perf_counter() - started) / calls


def measure(with_probe: bool, args: argparse.Namespace, run_dir: str) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env = {k: v for k, v in env.items() if not k.startswith("REPRO_GATE_")}
    if with_probe:
        env.update(
            PYTHONPATH=str(INJECT_DIR), REPRO_GATE_RUN_DIR=run_dir, REPRO_GATE_MODE="default"
        )
        if args.resume_records:
            env["REPRO_GATE_RESUME_RECORDS"] = "1"
    command = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--batch-size",
               str(args.batch_size), "--device", args.device, "--layers", str(args.layers),
               "--deep-width", str(args.deep_width)]
    command += ["--as-accelerator"] if args.as_accelerator else []
    command += ["--resume-records"] if args.resume_records else []
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _pct(part: float, whole: float) -> float:
    return round(100 * part / whole, 2)


def summarise(off: list[dict[str, Any]], on: list[dict[str, Any]],
              args: argparse.Namespace, load_before: tuple[float, ...]) -> dict[str, Any]:
    """The JSON report: medians over the repeats, shares of the probe-off step."""
    runs = off + on
    step_off = statistics.median(r["step_seconds"] for r in off)
    step_on = statistics.median(r["step_seconds"] for r in on)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    by_every = {every: statistics.median(r["record_seconds_by_every"][every] for r in runs)
                for every in runs[0]["record_seconds_by_every"]}
    return {
        "model": MODEL if not args.layers else f"{args.layers} x Linear({args.deep_width}, "
                 f"{args.deep_width})+ReLU, Linear({args.deep_width}, 1), fp32, Adam, MSE loss",
        "device": args.device, "as_accelerator": args.as_accelerator,
        "params": runs[0]["params"], "tensors": runs[0]["tensors"],
        "batch_size": args.batch_size, "steps_per_run": args.steps, "repeats": args.repeats,
        "torch_threads": runs[0]["threads"],
        "step_seconds_off": round(step_off, 6), "step_seconds_on": round(step_on, 6),
        "overhead_pct": _pct(step_on - step_off, step_off),
        # Each on-run against the off-run just before it: robust to drifting load.
        "overhead_pct_paired_median": round(100 * statistics.median(
            b["step_seconds"] / a["step_seconds"] - 1 for a, b in zip(off, on, strict=True)), 2),
        "step_seconds_off_runs": [round(r["step_seconds"], 4) for r in off],
        "step_seconds_on_runs": [round(r["step_seconds"], 4) for r in on],
        "record_seconds": round(median("record_seconds"), 6),
        "record_pct": _pct(median("record_seconds"), step_off),
        "record_pct_runs": [_pct(r["record_seconds"], r["step_seconds"]) for r in off],
        "host_seconds": round(median("host_seconds"), 6),
        "record_seconds_by_every": {k: round(v, 6) for k, v in by_every.items()},
        "record_pct_by_every": {k: _pct(v, step_off) for k, v in by_every.items()},
        "params_only_seconds": round(median("params_only_seconds"), 6),
        "params_only_pct": _pct(median("params_only_seconds"), step_off),
        # Same process, same model: the record against the earlier probe's digest.
        "record_over_params_only": round(statistics.median(
            r["record_seconds"] / r["params_only_seconds"] for r in runs), 3),
        **(_resume_summary(runs, off, step_off) if args.resume_records else {}),
        "load_average_before": [round(load, 2) for load in load_before],
        "load_average_after": [round(load, 2) for load in os.getloadavg()],
    }


def _resume_summary(runs: list[dict[str, Any]], off: list[dict[str, Any]],
                    step_off: float) -> dict[str, Any]:
    """The resume records' added cost: a share of the probe-off step, and against the step
    record measured in the same process."""
    seconds = statistics.median(r["resume_record_seconds"] for r in runs)
    return {
        "resume_record_seconds": round(seconds, 6),
        "resume_record_pct": _pct(seconds, step_off),
        "resume_record_pct_runs": [_pct(r["resume_record_seconds"], r["step_seconds"])
                                   for r in off],
        "resume_over_record": round(statistics.median(
            r["resume_record_seconds"] / r["record_seconds"] for r in runs), 3),
        "resume_record_errors": sorted({e for r in runs for e in r["resume_record_errors"]}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=0, help="a deep model of N layers")
    parser.add_argument("--deep-width", type=int, default=DEEP_WIDTH, help="its layers' width")
    parser.add_argument("--as-accelerator", action="store_true",
                        help="time the records on CPU as on an accelerator")
    parser.add_argument("--resume-records", action="store_true",
                        help="the resume check's records too: their added cost per step")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    off: list[dict[str, Any]] = []
    on: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as run_dir:
        for _ in range(args.repeats):
            off.append(measure(False, args, run_dir))
            on.append(measure(True, args, run_dir))
    print(json.dumps(summarise(off, on, args, load_before)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
