"""GPU acceptance: the embedded reference at GPU size through `repro-gate check`, and the probe.

On a machine with a CUDA GPU, runs `repro-gate check --device cuda --noise-floor` on the embedded
reference training at GPU size (its embedding backward and index_add_ use atomics when
determinism is off), then bench/probe_overhead.py on the GPU (the 10.5M-parameter MLP, and a
deep model of hundreds of parameter tensors), and prints one JSON object:

- checks.deterministic_bitwise_equal: verdict pass on a bitwise comparison, runs A and B equal
  at every recorded step and in every artifact (with determinism on, the GPU is reproducible);
- checks.noise_floor_diverges: the two default-mode runs differ (noise_floor.first_divergent_step
  is set): the nondeterminism that determinism removes is real on this GPU;
- checks.records_whole_on_gpu: no step record of the GPU runs is sampled (sampling is CPU-only);
- checks.probe_under_1pct: the probe's step record costs at most 1% of the step, device time
  included, on both models;
- cost: the manifest's `cost` section as the gate wrote it (status, interval, design, ...);
- probe_overhead: per model, the step, the record (device time included), the hooks' host time.

With --dry-run-on-cpu everything runs on CPU instead, to check the script itself where no GPU
is; its checks then say nothing about a GPU (the noise floor does not diverge on CPU).
Exit codes: 0 every check passed; 1 a check failed; 2 the gate or a benchmark errored;
3 no CUDA GPU here (one line on stderr, nothing run); 4 bad arguments.
Usage: python bench/gpu_acceptance.py [--steps 200] [--batch-size 512] [--width 256]
       [--probe-repeats 3] [--deep-layers 150] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_NO_GPU, EXIT_USAGE = 0, 1, 2, 3, 4
MAX_RECORD_PCT = 1.0
COST_KEYS = ("status", "reason", "pct", "ci95_pct", "basis", "det_step_seconds",
             "default_step_seconds", "design", "max_width_pct", "budget", "breakdown", "note")


class AcceptanceError(Exception):
    """The gate or a benchmark could not run: exit EXIT_ERROR with this one line."""


@dataclass(frozen=True)
class GpuSize:
    steps: int
    batch_size: int
    width: int
    device: str  # cuda; cpu only for a dry run of this script's own logic


def cuda_device() -> str | None:
    """The CUDA device's name, or None without torch, a CUDA build or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(0))


def run_gate(size: GpuSize, output_dir: Path) -> tuple[int, dict[str, Any]]:
    """`repro-gate check` on the reference at GPU size: its exit code and manifest."""
    command = [sys.executable, "-m", "repro_gate", "check", "--device", size.device,
               "--noise-floor", "--steps", str(size.steps), "--batch-size", str(size.batch_size),
               "--width", str(size.width), "--no-report", "--json", "-q",
               "--output-dir", str(output_dir)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=output_dir.parent)
    if result.returncode not in (0, 1):
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise AcceptanceError(f"repro-gate check exited {result.returncode}: {tail}")
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise AcceptanceError(f"repro-gate check printed no manifest: {error}") from None


def probe_overhead(device: str, repeats: int, layers: int) -> dict[str, Any]:
    """bench/probe_overhead.py on the GPU (the MLP, or a deep model of `layers` layers)."""
    command = [sys.executable, str(BENCH / "probe_overhead.py"), "--device", device,
               "--repeats", str(repeats), "--steps", "50", "--layers", str(layers)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise AcceptanceError(f"probe_overhead.py exited {result.returncode}: {tail}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    keys = ("model", "params", "tensors", "step_seconds_off", "step_seconds_on", "record_seconds",
            "record_pct", "host_seconds", "overhead_pct_paired_median", "params_only_pct")
    return {key: report.get(key) for key in keys}


def bitwise_equal(manifest: dict[str, Any]) -> bool:
    comparison = manifest.get("comparison") or {}
    artifacts = comparison.get("artifacts") or []
    return (manifest.get("verdict") == "pass" and comparison.get("basis") == "bitwise"
            and (comparison.get("trajectory") or {}).get("status") == "equal"
            and all(item.get("status") == "equal" for item in artifacts))


def records_whole(manifest: dict[str, Any]) -> bool:
    """No run's step record is sampled (read from the runs' trajectory files)."""
    for run in manifest.get("runs") or []:
        path = Path(run.get("run_dir", "")) / ".repro-gate" / "trajectory.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip() and "sampled" in json.loads(line):
                    return False
    return True


def accept(size: GpuSize, repeats: int, deep_layers: int, output_dir: Path) -> dict[str, Any]:
    """Everything the script checks, as the JSON it prints."""
    exit_code, manifest = run_gate(size, output_dir)
    noise_floor = manifest.get("noise_floor") or {}
    overhead = {"mlp": probe_overhead(size.device, repeats, 0),
                "deep": probe_overhead(size.device, repeats, deep_layers)}
    checks = {
        "deterministic_bitwise_equal": bitwise_equal(manifest),
        "noise_floor_diverges": noise_floor.get("first_divergent_step") is not None,
        "records_whole_on_gpu": records_whole(manifest),
        "probe_under_1pct": all((o["record_pct"] or 0) <= MAX_RECORD_PCT
                                for o in overhead.values()),
    }
    cost = manifest.get("cost") or {}
    return {
        "gpu": cuda_device(),
        "device": size.device,
        "reference": {"steps": size.steps, "batch_size": size.batch_size, "width": size.width},
        "checks": checks,
        "ok": all(checks.values()),
        "gate": {"exit_code": exit_code, "verdict": manifest.get("verdict"),
                 "reasons": [r.get("code") for r in manifest.get("reasons") or []],
                 "wall_seconds": manifest.get("wall_seconds"),
                 "first_divergence": (manifest.get("comparison") or {}).get("first_divergence")},
        "noise_floor": noise_floor,
        "cost": {key: cost[key] for key in COST_KEYS if key in cost},
        "probe_overhead": overhead,
    }


class _Parser(argparse.ArgumentParser):
    """Bad arguments exit EXIT_USAGE (argparse's own 2 is EXIT_ERROR here)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"gpu_acceptance: {message}\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--probe-repeats", type=int, default=3)
    parser.add_argument("--deep-layers", type=int, default=150, help="2N parameter tensors")
    parser.add_argument("--dry-run-on-cpu", action="store_true",
                        help="run everything on CPU: checks this script, accepts nothing")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the gate writes (default: a temporary directory)")
    args = parser.parse_args(argv)
    if min(args.steps, args.batch_size, args.width, args.probe_repeats, args.deep_layers) < 1:
        parser.error("--steps, --batch-size, --width, --probe-repeats and --deep-layers must be"
                     " at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if cuda_device() is None and not args.dry_run_on_cpu:
        print("gpu_acceptance: no CUDA GPU here (torch.cuda.is_available() is False or torch is"
              " missing): nothing was run", file=sys.stderr)
        return EXIT_NO_GPU
    size = GpuSize(args.steps, args.batch_size, args.width,
                   "cpu" if args.dry_run_on_cpu else "cuda")
    try:
        if args.output_dir is not None:
            args.output_dir.mkdir(parents=True, exist_ok=True)
            report = accept(size, args.probe_repeats, args.deep_layers, args.output_dir.resolve())
        else:
            with tempfile.TemporaryDirectory(prefix="gpu-acceptance-") as tmp:
                report = accept(size, args.probe_repeats, args.deep_layers, Path(tmp) / "out")
    except AcceptanceError as error:
        print(f"gpu_acceptance: {error}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(report))
    return EXIT_OK if report["ok"] else EXIT_CHECK_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
