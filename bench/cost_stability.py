"""Stability of the cost of determinism: N repeated gates on the embedded reference training.

Runs `repro-gate check` on the reference N times, one after the other, each in a fresh output
directory, and prints as JSON each gate's cost (status, figure, 95% interval, pairs, reason),
the spread of the measured figures (max - min, percentage points), the pooled median (the
median of every pair's cost over all repeats: the best estimate the data give), whether every
measured interval contains it, whether the target is met (>= 3 of 5 measured, at most one
measured interval missing the pooled median, spread <= 15 pp), and the machine's load
average before and after each gate.

Usage: python bench/cost_stability.py [--repeats 5] [--steps N] [--] [extra check flags]
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
from typing import Any

TARGET_MEASURED = 3  # of 5 repeats
TARGET_SPREAD_PP = 15.0
# Five 95% intervals miss the truth twice or more in 2.3% of series: one miss is chance.
TARGET_MAX_MISSING = 1


def gate(output: Path, steps: int | None, extra: list[str]) -> dict[str, Any]:
    """One `repro-gate check` on the reference: its cost section, wall time and load."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--no-report",
         "-o", str(output), *(["--steps", str(steps)] if steps else []), *extra],
        capture_output=True, text=True, check=False, cwd=output.parent,
    )
    wall = time.perf_counter() - started
    manifest_path = output / "manifest.json"
    if not manifest_path.is_file():
        raise SystemExit(f"cost_stability: the gate wrote no manifest: {done.stderr.strip()}")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    cost = manifest.get("cost") or {}
    return {
        "verdict": manifest["verdict"],
        "status": cost.get("status"),
        "pct": cost.get("pct"),
        "ci95_pct": cost.get("ci95_pct"),
        "pairs": (cost.get("design") or {}).get("pairs"),
        "block_steps": (cost.get("design") or {}).get("block_steps"),
        "pair_pcts": cost.get("pair_pcts") or [],
        "reason": cost.get("reason"),
        "det_step_ms": _ms(cost.get("det_step_seconds")),
        "default_step_ms": _ms(cost.get("default_step_seconds")),
        "gate_seconds": round(wall, 1),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def summary(gates: list[dict[str, Any]]) -> dict[str, Any]:
    """Spread, pooled median and the target's checks over the repeats."""
    measured = [g for g in gates if g["status"] == "measured"]
    figures = [g["pct"] for g in measured]
    units = [pct for g in gates for pct in g["pair_pcts"]]
    pooled = statistics.median(units) if units else None
    contain = [g["ci95_pct"][0] <= pooled <= g["ci95_pct"][1]
               for g in measured if pooled is not None]
    spread = round(max(figures) - min(figures), 2) if figures else None
    return {
        "measured": len(measured),
        "inconclusive": len(gates) - len(measured),
        "spread_pp": spread,
        "pooled_median_pct": None if pooled is None else round(pooled, 2),
        "median_of_figures_pct": round(statistics.median(figures), 2) if figures else None,
        "every_measured_interval_contains_pooled_median": all(contain) if measured else None,
        "intervals_missing_pooled_median": contain.count(False),
        "target_met": (len(measured) >= TARGET_MEASURED * len(gates) / 5
                       and contain.count(False) <= TARGET_MAX_MISSING
                       and spread is not None and spread <= TARGET_SPREAD_PP),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, help="reference steps (default: the gate's)")
    parser.add_argument("extra", nargs="*", help="more `repro-gate check` flags, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cost-stability-") as scratch:
        gates = [gate(Path(scratch) / f"gate-{index}", args.steps, args.extra)
                 for index in range(args.repeats)]
    print(json.dumps({"repeats": args.repeats, "reference_steps": args.steps,
                      "check_flags": args.extra, "cpus": os.cpu_count(),
                      "gates": gates, **summary(gates)}, indent=1))
    return 0


def _ms(seconds: Any) -> float | None:
    return None if seconds is None else round(float(seconds) * 1000.0, 3)


if __name__ == "__main__":
    sys.exit(main())
