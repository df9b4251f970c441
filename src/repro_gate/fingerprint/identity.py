"""The configuration's identity: `config_hash` over the reproducibility-relevant subset.

What is in and what is out is listed in docs/fingerprint.md; `identity()` is the single place that
decides it. Volatile facts (GPU UUIDs, PCI bus IDs, host names, timestamps, durations, the kernel
release, the git ref and remote) stay in the fingerprint but out of the hash, and so does the
hash seed: the gate gives each run its own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Per-GPU facts that identify the model and its mode, not the physical board.
GPU_IDENTITY_FIELDS = ("name", "compute_capability", "memory_mib", "mig_mode", "ecc_mode")
FLAG_FIELDS = (
    "deterministic_algorithms",
    "warn_only",
    "cudnn_deterministic",
    "cudnn_benchmark",
    "cudnn_enabled",
    "fill_uninitialized_memory",
    "cublas_workspace_config",
    "float32_matmul_precision",
    "cuda_matmul_allow_tf32",
    "cudnn_allow_tf32",
    "cuda_matmul_fp32_precision",
    "cudnn_fp32_precision",
)
# NCCL/NVTE variables that only log, name interfaces or set timeouts: the rest of the two
# families can choose algorithms, protocols, channels or kernels, and so the order of a sum.
DISTRIBUTED_VARIABLES_OUT = ("NCCL_DEBUG", "NVTE_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA",
                             "NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_TIMEOUT")


def identity(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The reproducibility-relevant subset of a fingerprint, as plain JSON values."""
    code = fingerprint.get("code") or {}
    env = fingerprint.get("env") or {}
    image = env.get("image") or {}
    random = fingerprint.get("random") or {}
    flags = random.get("flags") or {}
    threads = random.get("threads") or {}
    distributed = random.get("distributed") or {}
    hardware = fingerprint.get("hardware") or {}
    digests = sorted({d.rsplit("@", 1)[-1] for d in image.get("repo_digests") or []})
    return {
        "code": {key: code.get(key) for key in ("commit", "dirty", "diff_sha256")},
        "data": {
            entry["path"]: {key: entry.get(key) for key in ("sha256", "bytes", "files")}
            for entry in (fingerprint.get("data") or {}).get("paths", [])
        },
        "env": {
            "image": {
                "id": image.get("id"),
                "digests": digests,
                # A reference only identifies the image when nothing better is known.
                "reference": None if image.get("id") or digests else image.get("reference"),
            },
            **{key: env.get(key) for key in (
                "python", "implementation", "os", "libc", "machine", "torch", "torch_git",
                "cuda_build", "hip", "cudnn", "nccl", "numpy")},
            "packages": (env.get("packages") or {}).get("versions") or {},
            "lockfiles": {lf["path"]: lf["sha256"] for lf in env.get("lockfiles") or []},
        },
        "random": {
            "seed": random.get("seed"),
            "seeded_by_training": seeded_by_training(random.get("seeding")),
            **{key: flags.get(key) for key in FLAG_FIELDS},
            "torch_num_threads": threads.get("torch_num_threads"),
            "torch_num_interop_threads": threads.get("torch_num_interop_threads"),
            "thread_env": threads.get("env") or {},
            **distributed_identity(distributed),
        },
        "hardware": {
            "cpu_model": (hardware.get("cpu") or {}).get("model"),
            "cpu_count": (hardware.get("cpu") or {}).get("count"),
            "driver_version": hardware.get("driver_version"),
            "cuda_driver_version": hardware.get("cuda_driver_version"),
            "gpus": sorted(
                ({key: gpu.get(key) for key in GPU_IDENTITY_FIELDS}
                 for gpu in hardware.get("gpus") or []),
                key=canonical_json,
            ),
        },
    }


def seeded_by_training(seeding: Any) -> str | None:
    """The generators the training seeds itself, as `numpy, torch`; None when it seeds none
    (or when that was not recorded)."""
    calls = seeding.get("training") if isinstance(seeding, dict) else None
    names = sorted({str(c.get("generator")) for c in calls or [] if isinstance(c, dict)})
    return ", ".join(names) or None


def distributed_identity(distributed: dict[str, Any]) -> dict[str, Any]:
    """World size, backend and numeric NCCL/NVTE variables; nothing for one plain process, so
    the config_hash of a single-process training is the same as before ranks were recorded (a
    fingerprint from before then was one process too)."""
    facts = {
        "world_size": distributed.get("world_size") or 1,
        "distributed_backend": distributed.get("backend"),
        "distributed_env": numeric_distributed_variables(distributed.get("variables") or {}),
    }
    single: dict[str, Any] = {"world_size": 1, "distributed_backend": None, "distributed_env": {}}
    return {} if facts == single else facts


def numeric_distributed_variables(variables: dict[str, str]) -> dict[str, str]:
    """The NCCL_*/NVTE_* variables that may change numerics (all but logging and timeouts)."""
    return {name: value for name, value in variables.items()
            if not name.startswith(DISTRIBUTED_VARIABLES_OUT)}


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the same text for the same value everywhere."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def config_hash(fingerprint: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of `identity(fingerprint)`."""
    return hashlib.sha256(canonical_json(identity(fingerprint)).encode("utf-8")).hexdigest()
