"""Per-step cost of the repro-gate probe on a model of more than 10M parameters.

Runs the same training (a 10.5M-parameter MLP, Adam, batch 256 by default) in fresh processes
without and with the probe (default mode: it only observes), interleaved, several times, and
prints as JSON the medians of the mean step times, the time of the probe's step record (digests
of gradients, parameters and the input batch) and, as the reference in the same process, of the
earlier probe's record (ordered digests of the parameters only), measured in the worker after
training, and the machine's load average.
Usage: python bench/probe_overhead.py [--repeats 5] [--steps 20] [--batch-size 256]
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
from pathlib import Path

INJECT_DIR = Path(__file__).resolve().parents[1] / "src" / "repro_gate" / "probe" / "inject"
WARMUP_STEPS = 3
WIDTH = 1024
HIDDEN = 4608
MODEL = f"MLP {WIDTH}-{HIDDEN}-{WIDTH}-{WIDTH}-1 (Linear+ReLU), fp32, Adam lr 1e-4, MSE loss"


def worker(steps: int, batch_size: int) -> None:
    """Train the model and print the mean seconds per step (the probe is active if injected)."""
    import torch
    from torch import nn

    model = nn.Sequential(
        nn.Linear(WIDTH, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, 1),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = torch.randn(batch_size, WIDTH)
    target = torch.randn(batch_size, 1)
    started = 0.0
    for step in range(WARMUP_STEPS + steps):
        if step == WARMUP_STEPS:
            started = time.perf_counter()
        loss = nn.functional.mse_loss(model(data), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    step_seconds = (time.perf_counter() - started) / steps
    # The probe's recordings alone, in this process, on the trained model (its gradients are
    # still there): measured without noise from the other process.
    sys.path.insert(0, str(INJECT_DIR))
    from _repro_gate_digest import finish_digests, start_digests
    from _repro_gate_steps import evidence_before_step, step_digests

    named = list(model.named_parameters())
    batch = [data]

    def today() -> None:  # the earlier probe: the parameters' ordered digests only
        finish_digests(start_digests([param for _, param in named], ordered=True))

    def record() -> None:  # the whole record: gradients, parameters, inputs (first step: init)
        before = evidence_before_step(optimizer, named, first=False)
        inputs = _Inputs(batch)
        step_digests(optimizer, named, before, inputs)  # type: ignore[arg-type]

    print(json.dumps({
        "params": sum(p.numel() for p in model.parameters()),
        "step_seconds": step_seconds,
        "params_only_seconds": _time_per_call(today, steps),
        "record_seconds": _time_per_call(record, steps),
        "threads": torch.get_num_threads(),
    }))


class _Inputs:
    """The step's input batch, as the probe's StepInputs hands it over."""

    def __init__(self, tensors: list) -> None:
        from _repro_gate_digest import start_digests

        self._pending = [start_digests(tensors, ordered=True)]

    def take(self) -> list:
        return self._pending


def _time_per_call(function, calls: int) -> float:
    function()
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


def measure(with_probe: bool, steps: int, batch_size: int, run_dir: str) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env = {k: v for k, v in env.items() if not k.startswith("REPRO_GATE_")}
    if with_probe:
        env.update(
            PYTHONPATH=str(INJECT_DIR), REPRO_GATE_RUN_DIR=run_dir, REPRO_GATE_MODE="default"
        )
    command = [
        sys.executable,
        __file__,
        "--worker",
        "--steps",
        str(steps),
        "--batch-size",
        str(batch_size),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.batch_size)
        return 0
    off: list[float] = []
    on: list[float] = []
    today: list[float] = []
    record: list[float] = []
    params = 0
    threads = 0
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as run_dir:
        for _ in range(args.repeats):
            for with_probe, times in ((False, off), (True, on)):
                result = measure(with_probe, args.steps, args.batch_size, run_dir)
                params = int(result["params"])
                threads = int(result["threads"])
                times.append(result["step_seconds"])
                today.append(result["params_only_seconds"])
                record.append(result["record_seconds"])
    step_off, step_on = statistics.median(off), statistics.median(on)
    print(
        json.dumps(
            {
                "model": MODEL,
                "params": params,
                "batch_size": args.batch_size,
                "steps_per_run": args.steps,
                "repeats": args.repeats,
                "torch_threads": threads,
                "step_seconds_off": round(step_off, 6),
                "step_seconds_on": round(step_on, 6),
                "overhead_pct": round(100 * (step_on - step_off) / step_off, 2),
                # Each on-run against the off-run just before it: robust to drifting load.
                "overhead_pct_paired_median": round(
                    100 * statistics.median(b / a - 1 for a, b in zip(off, on, strict=True)), 2
                ),
                "step_seconds_off_runs": [round(t, 4) for t in off],
                "step_seconds_on_runs": [round(t, 4) for t in on],
                "params_only_seconds": round(statistics.median(today), 6),
                "params_only_pct": round(100 * statistics.median(today) / step_off, 2),
                "record_seconds": round(statistics.median(record), 6),
                "record_pct": round(100 * statistics.median(record) / step_off, 2),
                # Same process, same model: the new record against the earlier probe's digest.
                "record_over_params_only_runs": [
                    round(r / t, 3) for r, t in zip(record, today, strict=True)
                ],
                "record_over_params_only": round(
                    statistics.median(r / t for r, t in zip(record, today, strict=True)), 3
                ),
                "load_average_before": [round(load, 2) for load in load_before],
                "load_average_after": [round(load, 2) for load in os.getloadavg()],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
