"""Throughput of hashing the `data` paths, against `sha256sum` of the same files.

Writes `--mb` megabytes of random bytes in `--files` files (in nested directories), warms the
page cache, then times `hash_data` and one `sha256sum` over all the files, alternating, and keeps
the best of `--repeats` for each. Prints one JSON object; `ratio` is our throughput over
sha256sum's (target >= 0.9) and `digests_match` checks both tools agree on every file.
Usage: python bench/data_hashing.py [--mb 300] [--files 600] [--repeats 3] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from repro_gate.fingerprint.data import default_workers, hash_data, list_files

MB = 1024 * 1024
TARGET_RATIO = 0.9


def build_dataset(root: Path, megabytes: int, files: int) -> None:
    """`files` files of random bytes, about `megabytes` in total, 20 files per directory."""
    size = max(1, megabytes * MB // files)
    for index in range(files):
        directory = root / f"shard-{index // 20:03d}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"part-{index:05d}.bin").write_bytes(os.urandom(size))


def time_ours(root: Path, workers: int) -> tuple[float, dict[str, str]]:
    started = time.perf_counter()
    result = hash_data([root.name], root.parent, workers=workers)
    elapsed = time.perf_counter() - started
    return elapsed, result["paths"][0]["file_sha256"]


def time_sha256sum(root: Path, names: list[str]) -> tuple[float, dict[str, str]]:
    started = time.perf_counter()
    output = subprocess.run(["sha256sum", "--", *names], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    elapsed = time.perf_counter() - started
    digests = {}
    for line in output.splitlines():
        digest, _, name = line.partition("  ")
        digests[name] = digest
    return elapsed, digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="total megabytes of data")
    parser.add_argument("--files", type=int, default=600, help="number of files")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per tool")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="hashing threads (default: usable CPUs, at most 8)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="repro-gate-bench-") as tmp:
        root = Path(tmp) / "data"
        build_dataset(root, args.mb, args.files)
        names = list_files(root)
        total = sum((root / name).stat().st_size for name in names)
        time_sha256sum(root, names)  # warm the page cache for both tools
        ours, theirs = [], []
        digests_match = True
        for _ in range(args.repeats):
            seconds, digests = time_ours(root, args.workers)
            ours.append(seconds)
            reference_seconds, reference = time_sha256sum(root, names)
            theirs.append(reference_seconds)
            digests_match = digests_match and digests == reference
    best_ours, best_theirs = min(ours), min(theirs)
    print(json.dumps({
        "files": len(names),
        "bytes": total,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "repro_gate_seconds": round(best_ours, 4),
        "sha256sum_seconds": round(best_theirs, 4),
        "repro_gate_mb_per_s": round(total / MB / best_ours, 1),
        "sha256sum_mb_per_s": round(total / MB / best_theirs, 1),
        "ratio": round(best_theirs / best_ours, 3),
        "target_ratio": TARGET_RATIO,
        "meets_target": best_theirs / best_ours >= TARGET_RATIO,
        "digests_match": digests_match,
        "repro_gate_runs_s": [round(s, 4) for s in ours],
        "sha256sum_runs_s": [round(s, 4) for s in theirs],
    }, indent=2))


if __name__ == "__main__":
    main()
