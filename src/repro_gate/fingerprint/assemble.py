"""Merge host facts, the runs' in-process fingerprints and the image into one fingerprint."""

from __future__ import annotations

from typing import Any

from repro_gate.config import Config
from repro_gate.fingerprint.nvml import join_gpus
from repro_gate.fingerprint.packages import lock_mismatches
from repro_gate.fingerprint.seeding import seeding

FORMAT_VERSION = 1
DEFAULT_RUN = "default"  # the cost run: determinism off on purpose, so not the source of flags
# In-process facts that legitimately differ from run to run.
# Facts that may differ between deterministic runs: the hash seed differs on purpose.
VOLATILE_IN_PROCESS = ("dataloaders", "errors", "random.torch_initial_seed",
                       "random.seeding.calls", "random.seeding.first_parameter",
                       "random.pythonhashseed")


def deterministic_runs(in_process: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Runs other than the default-mode one that left a fingerprint, by name."""
    return {
        name: data for name, data in sorted(in_process.items())
        if name != DEFAULT_RUN and isinstance(data, dict)
    }


def pick_source(in_process: dict[str, dict[str, Any] | None]
                ) -> tuple[str | None, dict[str, Any] | None]:
    """The run whose in-process facts describe the environment: the first deterministic one."""
    runs = deterministic_runs(in_process)
    if runs:
        name = next(iter(runs))
        return name, runs[name]
    default = in_process.get(DEFAULT_RUN)
    return (DEFAULT_RUN, default) if isinstance(default, dict) else (None, None)


def describe_image(configured: str | None, image: dict[str, Any] | None) -> dict[str, Any]:
    """Reference, image ID and RepoDigests, or `status: unknown|none` with the reason."""
    if image is not None:
        known = bool(image.get("id"))
        result = {
            "status": "known" if known else "unknown",
            "reference": image.get("reference") or configured,
            "id": image.get("id") or None,
            "repo_digests": sorted(image.get("repo_digests") or []),
        }
        if not result["repo_digests"]:
            result["digests_reason"] = "no RepoDigests: the image was built locally, never pulled"
        if not known:
            result["reason"] = "the launcher could not inspect the image"
        return result
    if configured:
        return {"status": "unknown", "reference": configured, "id": None, "repo_digests": [],
                "reason": "the image was not inspected (no container run yet)"}
    return {"status": "none", "reference": None, "id": None, "repo_digests": [],
            "reason": "local run: no container image"}


def build_fingerprint(
    config: Config,
    host: dict[str, Any],
    in_process: dict[str, dict[str, Any] | None],
    image: dict[str, Any] | None,
) -> dict[str, Any]:
    """The manifest's `fingerprint` section, in five categories plus where the facts came from."""
    source, runtime = pick_source(in_process)
    lockfiles = host.get("lockfiles") or []
    return {
        "format": FORMAT_VERSION,
        "collected_at": host.get("collected_at"),
        "code": host.get("code") or {},
        "data": host.get("data") or {"paths": [], "bytes": 0, "files": 0},
        "env": _env(config, runtime, lockfiles, image),
        "random": _random(config, runtime),
        "hardware": _hardware(host, runtime),
        "in_process": _in_process_summary(in_process, source),
    }


def _env(config: Config, runtime: dict[str, Any] | None,
         lockfiles: list[dict[str, Any]], image: dict[str, Any] | None) -> dict[str, Any]:
    runtime = runtime or {}
    python = runtime.get("python") or {}
    system = runtime.get("platform") or {}
    torch = runtime.get("torch") or {}
    packages = runtime.get("packages") or None
    env: dict[str, Any] = {
        "image": describe_image(config.container.image, image),
        "python": python.get("version"),
        "implementation": python.get("implementation"),
        "os": system.get("os"),
        "kernel": system.get("kernel"),
        "libc": system.get("libc"),
        "machine": system.get("machine"),
        "torch": torch.get("version"),
        "torch_git": torch.get("git_version"),
        "cuda_build": torch.get("cuda"),
        "hip": torch.get("hip"),
        "cudnn": torch.get("cudnn"),
        "nccl": torch.get("nccl"),
        "numpy": (runtime.get("numpy") or {}).get("version"),
        "packages": packages,
        "lockfiles": lockfiles,
        "lock_mismatches": lock_mismatches((packages or {}).get("versions") or {}, lockfiles),
    }
    if not runtime:
        env["reason"] = "no in-process fingerprint: the probe wrote none"
    elif torch.get("reason"):
        env["torch_reason"] = torch["reason"]
    return env


def _random(config: Config, runtime: dict[str, Any] | None) -> dict[str, Any]:
    """`seed` is the gate's (null unless `seed` is set); `seeding` says who seeded what."""
    runtime = runtime or {}
    random = runtime.get("random") or {}
    return {
        "seed": config.seed,
        "seeding": seeding(config, runtime or None),
        "pythonhashseed": random.get("pythonhashseed"),
        "torch_initial_seed": random.get("torch_initial_seed"),
        "flags": runtime.get("flags") or {},
        "threads": runtime.get("threads") or {},
        "distributed": runtime.get("distributed") or {"world_size": 1, "backend": None,
                                                       "nccl": None, "variables": {}},
    }


def _hardware(host: dict[str, Any], runtime: dict[str, Any] | None) -> dict[str, Any]:
    nvml = host.get("gpus") or {}
    torch_gpus = (runtime or {}).get("gpus") or {}
    gpus = join_gpus(nvml.get("devices") or [], torch_gpus.get("devices") or [])
    hardware: dict[str, Any] = {
        "hostname": host.get("hostname"),
        "cpu": host.get("cpu") or {},
        "driver_version": nvml.get("driver_version"),
        "cuda_driver_version": nvml.get("cuda_driver_version"),
        "visible_devices": torch_gpus.get("visible_devices"),
        "gpus": gpus,
    }
    if not gpus:
        reasons = [f"NVML: {nvml['reason']}" if nvml.get("reason") else "NVML: no GPU found"]
        reasons.append(f"torch: {torch_gpus.get('reason') or 'no CUDA device'}")
        hardware["gpu_reason"] = "; ".join(reasons)
    return hardware


def _in_process_summary(in_process: dict[str, dict[str, Any] | None], source: str | None
                        ) -> dict[str, Any]:
    runs = deterministic_runs(in_process)
    dataloaders: dict[tuple[Any, Any], dict[str, Any]] = {}
    errors: list[str] = []
    for name, data in sorted(in_process.items()):
        if not isinstance(data, dict):
            continue
        errors.extend(f"{name}: {message}" for message in data.get("errors") or [])
        if name == DEFAULT_RUN:
            continue
        for loader in data.get("dataloaders") or []:
            dataloaders.setdefault((loader.get("file"), loader.get("line")), dict(loader))
    return {
        "source": source,
        "runs": {name: ("recorded" if isinstance(data, dict) else "missing")
                 for name, data in sorted(in_process.items())},
        "mismatches": run_mismatches(runs),
        "dataloaders": list(dataloaders.values()),
        "errors": errors,
    }


def run_mismatches(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """In-process facts that differ between deterministic runs (they should not)."""
    if len(runs) < 2:
        return []
    flat = {name: _flatten(data) for name, data in runs.items()}
    keys = sorted(set().union(*(set(values) for values in flat.values())))
    mismatches = []
    for key in keys:
        if any(key == v or key.startswith(v + ".") for v in VOLATILE_IN_PROCESS):
            continue
        values = {name: flat[name].get(key) for name in flat}
        if len({repr(value) for value in values.values()}) > 1:
            mismatches.append({"field": key, "values": values})
    return mismatches


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}
