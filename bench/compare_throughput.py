"""Throughput of comparing identical checkpoint pairs, against `sha256sum` of the same files.

Builds torch.save checkpoints of `--mb` megabytes in total (runs A and B together), then times
`compare_artifact` over every A/B pair and one `sha256sum` over all the files, with a warm page
cache for both. Prints one JSON object; `ratio` is compare speed over sha256sum speed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from repro_gate.compare import compare_artifact

MB = 1024 * 1024
TARGET_RATIO = 0.8


def build_state_dict(megabytes: float, seed: int) -> dict[str, torch.Tensor]:
    """A state_dict of float32 tensors of mixed sizes (one big embedding, many small layers)."""
    generator = torch.Generator().manual_seed(seed)
    elements = int(megabytes * MB / 4)
    embedding = elements // 2
    tensors = {"embedding.weight": torch.randn(embedding, generator=generator)}
    remaining, layer = elements - embedding, 0
    while remaining > 0:
        size = min(remaining, 256 * 1024)
        tensors[f"layers.{layer}.weight"] = torch.randn(size, generator=generator)
        tensors[f"layers.{layer}.bias"] = torch.randn(64, generator=generator)
        remaining -= size
        layer += 1
    return tensors


def build_pairs(folder: Path, total_mb: float, files_per_run: int) -> list[tuple[Path, Path]]:
    """Identical checkpoints saved separately under `a/` and `b/`."""
    pairs = []
    for index in range(files_per_run):
        state = build_state_dict(total_mb / 2 / files_per_run, seed=index)
        paths = []
        for run in ("a", "b"):
            path = folder / run / f"model_{index}.pt"
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(state, path)
            paths.append(path)
        pairs.append((paths[0], paths[1]))
    return pairs


def time_compare(pairs: list[tuple[Path, Path]]) -> float:
    start = time.perf_counter()
    for path_a, path_b in pairs:
        result = compare_artifact(path_a, path_b, path_a.name, None)
        if result["status"] != "equal":
            raise SystemExit(f"{path_a.name}: expected equal, got {result['status']}")
    return time.perf_counter() - start


def time_sha256sum(files: list[Path]) -> float:
    start = time.perf_counter()
    subprocess.run(["sha256sum", *map(str, files)], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=400, help="total size of all checkpoints")
    parser.add_argument("--files", type=int, default=4, help="checkpoints per run")
    parser.add_argument("--repeat", type=int, default=3, help="timings taken; the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pairs = build_pairs(Path(folder), args.mb, args.files)
        files = [path for pair in pairs for path in pair]
        total_mb = sum(path.stat().st_size for path in files) / MB
        time_sha256sum(files)  # warm the page cache
        compare_seconds = min(time_compare(pairs) for _ in range(args.repeat))
        sha256sum_seconds = min(time_sha256sum(files) for _ in range(args.repeat))
    compare_rate = total_mb / compare_seconds
    sha256sum_rate = total_mb / sha256sum_seconds
    print(
        json.dumps(
            {
                "total_mb": round(total_mb, 1),
                "files": len(files),
                "compare_mb_per_s": round(compare_rate, 1),
                "sha256sum_mb_per_s": round(sha256sum_rate, 1),
                "ratio": round(compare_rate / sha256sum_rate, 2),
                "target": TARGET_RATIO,
            }
        )
    )


if __name__ == "__main__":
    main()
