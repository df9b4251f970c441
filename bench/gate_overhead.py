"""Gate overhead on the embedded reference workload.

overhead = (gate wall - sum of run walls) / sum of run walls, where the run walls are what the
launcher measured around each training process. Everything else the gate does (fingerprint,
artifact collection and comparison, manifest validation) is overhead: `overhead_pct` takes the
gate wall from the manifest (the gate's own work), `end_to_end_overhead_pct` from outside the
process (adding interpreter start-up and imports). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_gate(workdir: Path, steps: int) -> dict[str, float]:
    """Run `repro-gate check` once on the reference training; return its timings."""
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--no-report",
         "--steps", str(steps)],
        cwd=workdir, capture_output=True, text=True, check=False,
    )
    gate_wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"gate failed: {completed.stdout}{completed.stderr}")
    manifest = json.loads((workdir / "repro-gate-out" / "manifest.json").read_text())
    runs_wall = sum(run["wall_seconds"] for run in manifest["runs"])
    return {
        "gate_seconds": manifest["wall_seconds"],
        "process_seconds": gate_wall,
        "runs_seconds": runs_wall,
        "overhead_pct": (manifest["wall_seconds"] - runs_wall) / runs_wall * 100,
        "end_to_end_overhead_pct": (gate_wall - runs_wall) / runs_wall * 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="reference training steps")
    args = parser.parse_args()
    samples = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as workdir:
            samples.append(one_gate(Path(workdir), args.steps))
    def median(key: str) -> float:
        return round(statistics.median(s[key] for s in samples), 3)

    print(json.dumps({
        "workload": f"embedded reference training, {args.steps} steps, 3 runs",
        "repeats": args.repeats,
        "gate_seconds_median": median("gate_seconds"),
        "process_seconds_median": median("process_seconds"),
        "runs_seconds_median": median("runs_seconds"),
        "overhead_pct_median": median("overhead_pct"),
        "end_to_end_overhead_pct_median": median("end_to_end_overhead_pct"),
        "overhead_pct_samples": [round(s["overhead_pct"], 2) for s in samples],
        "target_pct": 2.0,
    }, indent=2))


if __name__ == "__main__":
    main()
