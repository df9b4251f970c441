"""The size of a golden trajectory: `--steps` optimizer steps of a `--tensors`-tensor model.

Makes the probe's step records for such a training (a float32 loss, one 16-hex digest per
parameter and gradient, the inputs' digest, the initial parameters at step 1) and a
safetensors checkpoint of the model (each tensor 64 x 64 float32), builds the golden document
from them as `repro-gate bless` does, writes it as the golden file is written, and compares a
run with it as the gate does. Prints one JSON object: `bytes` (target: under 1 MB for 10,000
steps of a 200-tensor model), `bytes_per_step`, and the seconds to build and to compare.
Usage: python bench/golden_size.py [--steps 10000] [--tensors 200]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from repro_gate.golden import comparison, document

TARGET_BYTES = 1_000_000


def digest(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


def records(steps: int, names: list[str]) -> list[dict[str, Any]]:
    """What the probe records per step for such a training."""
    rng = random.Random(0)
    loss = 2.5
    out = []
    for step in range(1, steps + 1):
        loss *= 0.9995
        bits = struct.unpack("f", struct.pack("f", loss))[0]
        record: dict[str, Any] = {
            "step": step, "time": 0.01, "loss": float(bits).hex(),
            "params": {name: digest(rng) for name in names},
            "grads": {name: digest(rng) for name in names},
            "inputs": digest(rng), "outputs": digest(rng)}
        if step == 1:
            record["init"] = {name: digest(rng) for name in names}
        out.append(record)
    return out


def fingerprint() -> dict[str, Any]:
    return {"hardware": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8},
            "env": {"python": "3.12.7", "torch": "2.6.0", "cuda_build": "12.4", "cudnn": 90100,
                    "image": {"repo_digests": ["ghcr.io/o/train@sha256:" + "0" * 64]},
                    "packages": {"sha256": "1" * 64},
                    "lockfiles": [{"path": "uv.lock", "sha256": "2" * 64}]},
            "code": {"commit": "3" * 40},
            "random": {"seeding": {"gate_seed": None, "training": [
                {"generator": "torch", "call": "torch.manual_seed", "seed": 0,
                 "file": "train.py", "line": 3}]}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--tensors", type=int, default=200)
    args = parser.parse_args()
    names = [f"layers.{i // 2}.{'weight' if i % 2 == 0 else 'bias'}" for i in range(args.tensors)]
    trajectory = records(args.steps, names)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "model.safetensors"
        generator = np.random.default_rng(0)
        save_file({name: generator.standard_normal((64, 64), dtype=np.float32)
                   for name in names}, str(checkpoint))
        run = document.RunData(trajectory, fingerprint(), [("model.safetensors", checkpoint)])
        started = time.perf_counter()
        golden = document.build(run, "2026-11-26T00:00:00+00:00")
        built = time.perf_counter() - started
        path = Path(tmp) / "gpu-h100-x8.json"
        document.write(golden, path)
        size = path.stat().st_size
        started = time.perf_counter()
        result = comparison.compare(document.read(path), golden, comparison.Tolerance())
        compared = time.perf_counter() - started
    print(json.dumps({
        "steps": args.steps, "tensors": args.tensors, "bytes": size,
        "bytes_per_step": round(size / args.steps, 1), "under_target": size < TARGET_BYTES,
        "sha256": hashlib.sha256(json.dumps(golden["steps"]).encode()).hexdigest()[:12],
        "build_seconds": round(built, 3), "read_and_compare_seconds": round(compared, 3),
        "status": result["status"]}, indent=2))


if __name__ == "__main__":
    main()
