"""In-process environment fingerprint: what the training's own interpreter sees.

Runs inside the user's image, where repro-gate is not installed: standard library only, torch and
numpy when already imported (or asked for). Nothing here raises; a fact that cannot be read is
recorded with the reason in the `errors` list or a `reason` field.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import threading
import warnings
from types import FrameType
from typing import Any

from _repro_gate_contract import ENV_SEED

FORMAT_VERSION = 1
# Variables that change thread counts or numerics of the BLAS/OpenMP libraries.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "MKL_CBWR",
    "KMP_DETERMINISTIC_REDUCTION",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "NVIDIA_TF32_OVERRIDE",
)
MAX_DATALOADERS = 50
TORCH_DEFAULT_SEED = 67280421310721  # the initial seed of a torch.Generator nobody seeded
# Prefixes of the variables of NCCL and Transformer Engine, which choose reduction algorithms,
# protocols and kernels: they can change the order of a sum across ranks.
DISTRIBUTED_VARIABLE_PREFIXES = ("NCCL_", "NVTE_")

_dataloaders: dict[tuple[str, int], dict[str, Any]] = {}
_lock = threading.Lock()
_installed = False
_process_group: dict[str, Any] = {}  # world size and backend seen while the group was up


def install_torch_observers() -> None:
    """Record every `torch.utils.data.DataLoader` construction (call right after torch import)."""
    global _installed
    try:
        if _installed:
            return
        from torch.utils.data import DataLoader

        original = DataLoader.__init__

        def observed_init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            _record_dataloader(self)

        observed_init.__wrapped__ = original  # type: ignore[attr-defined]
        DataLoader.__init__ = observed_init  # type: ignore[method-assign]
        _installed = True
    except Exception:  # torch missing or unusual: the fingerprint just has no DataLoader facts
        return


def _record_dataloader(loader: Any) -> None:
    try:
        file, line = _user_frame()
        entry = {
            "file": file,
            "line": line,
            "num_workers": int(getattr(loader, "num_workers", 0) or 0),
            "generator": getattr(loader, "generator", None) is not None,
            "worker_init_fn": getattr(loader, "worker_init_fn", None) is not None,
            "count": 1,
        }
        generator = getattr(loader, "generator", None)
        if generator is not None:  # its manual_seed cannot be watched (an immutable C type)
            entry["generator_seeded"] = int(generator.initial_seed()) != TORCH_DEFAULT_SEED
        with _lock:
            key = (str(file), int(line or 0))
            if key in _dataloaders:
                _dataloaders[key]["count"] += 1
            elif len(_dataloaders) < MAX_DATALOADERS:
                _dataloaders[key] = entry
    except Exception:
        return


def _user_frame() -> tuple[str | None, int | None]:
    """File (relative to the working directory when inside it) and line of the user's frame."""
    torch_dir = _torch_dir()
    this_file = os.path.abspath(__file__)
    fallback: tuple[str | None, int | None] = (None, None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename != this_file and not (torch_dir and filename.startswith(torch_dir)):
            if not _is_library(filename):
                return _relative(filename), frame.f_lineno
            if fallback[0] is None:
                fallback = (_relative(filename), frame.f_lineno)
        frame = frame.f_back
    # Built by a library (Lightning, ...) with no user frame above it: the library's line.
    return fallback


def _is_library(filename: str) -> bool:
    parts = filename.replace(os.sep, "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


def _relative(filename: str) -> str:
    cwd = os.getcwd()
    if filename.startswith(cwd + os.sep):
        return os.path.relpath(filename, cwd).replace(os.sep, "/")
    return filename


def collect(import_torch: bool = False) -> dict[str, Any]:
    """This interpreter's fingerprint; torch and numpy facts when they are imported already
    (or importable, with `import_torch`)."""
    errors: list[str] = []
    result: dict[str, Any] = {"format": FORMAT_VERSION}
    sections = (
        ("python", _python),
        ("platform", _platform),
        ("packages", _packages),
        ("numpy", lambda: _numpy(import_torch)),
        ("torch", lambda: _torch(import_torch)),
        ("random", _random),
        ("flags", _flags),
        ("threads", _threads),
        ("gpus", _gpus),
        ("distributed", _distributed),
    )
    for name, reader in sections:
        try:
            result[name] = reader()
        except Exception as error:  # one unreadable section must not lose the others
            result[name] = None
            errors.append(f"{name}: {type(error).__name__}: {error}")
    with _lock:
        result["dataloaders"] = [dict(entry) for entry in _dataloaders.values()]
    result["errors"] = errors
    return result


def _python() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def _platform() -> dict[str, Any]:
    libc_name, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "os": _os_name(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "libc": f"{libc_name} {libc_version}".strip() or None,
    }


def _os_name() -> str:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    key, _, value = line.strip().partition("=")
                    if key == "PRETTY_NAME":
                        return value.strip().strip('"')
        except OSError:
            continue
    return platform.platform(terse=True)


def _packages() -> dict[str, Any]:
    from importlib import metadata

    versions: dict[str, str] = {}
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            versions.setdefault(_canonical(name), distribution.version)
    ordered = dict(sorted(versions.items()))
    listing = "".join(f"{name}=={version}\n" for name, version in ordered.items())
    return {
        "count": len(ordered),
        "sha256": hashlib.sha256(listing.encode("utf-8")).hexdigest(),
        "versions": ordered,
    }


def _canonical(name: str) -> str:
    out = []
    previous_separator = False
    for char in name.lower():
        if char in "-_.":
            if not previous_separator:
                out.append("-")
            previous_separator = True
        else:
            out.append(char)
            previous_separator = False
    return "".join(out)


def _numpy(import_numpy: bool) -> dict[str, Any]:
    numpy = sys.modules.get("numpy")
    if numpy is None and import_numpy:
        try:
            import numpy
        except Exception:
            return {"version": None, "reason": "numpy is not installed"}
    if numpy is None:
        return {"version": None, "reason": "numpy was not imported"}
    return {"version": getattr(numpy, "__version__", None)}


def _import_torch(import_torch: bool) -> Any:
    torch = sys.modules.get("torch")
    if torch is None and import_torch:
        try:
            import torch
        except Exception:
            return None
    return torch


def _torch(import_torch: bool) -> dict[str, Any]:
    torch = _import_torch(import_torch)
    if torch is None:
        reason = "torch is not installed" if import_torch else "torch was not imported"
        return {"version": None, "reason": reason}
    version = getattr(torch, "version", None)
    nccl = None
    if hasattr(torch._C, "_nccl_version"):
        raw = torch.cuda.nccl.version()
        nccl = ".".join(str(part) for part in raw) if isinstance(raw, tuple) else str(raw)
    cudnn = torch.backends.cudnn.version()
    return {
        "version": str(torch.__version__),
        "git_version": getattr(version, "git_version", None),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "cudnn": str(cudnn) if cudnn is not None else None,
        "nccl": nccl,
        "debug": bool(getattr(version, "debug", False)),
    }


def note_process_group() -> None:
    """Remember the process group's world size and backend (call while training: a training
    usually destroys its group before the fingerprint is collected at exit)."""
    try:
        dist = sys.modules["torch"].distributed
        if dist.is_available() and dist.is_initialized():
            _process_group.update(world_size=int(dist.get_world_size()),
                                  backend=str(dist.get_backend()))
    except Exception:  # no torch.distributed: the fingerprint falls back to WORLD_SIZE
        return


def _distributed() -> dict[str, Any]:
    """World size, backend and NCCL of this process's process group, and the NCCL/NVTE variables."""
    result: dict[str, Any] = {"world_size": 1, "backend": None, "nccl": None}
    torch = sys.modules.get("torch")
    note_process_group()
    if _process_group:
        result.update(_process_group)
    elif os.environ.get("WORLD_SIZE", "").isdigit():
        result["world_size"] = int(os.environ["WORLD_SIZE"])
    if torch is not None and hasattr(torch._C, "_nccl_version"):
        raw = torch.cuda.nccl.version()
        result["nccl"] = ".".join(str(part) for part in raw) if isinstance(raw, tuple) else str(raw)
    result["variables"] = {
        name: value
        for name, value in sorted(os.environ.items())
        if name.startswith(DISTRIBUTED_VARIABLE_PREFIXES)
    }
    return result


def _random() -> dict[str, Any]:
    seed = os.environ.get(ENV_SEED)  # set by the gate for the training process
    torch = sys.modules.get("torch")
    initial_seed = None
    if torch is not None:
        initial_seed = int(torch.initial_seed())
    return {
        "seed": int(seed) if seed and seed.isdigit() else None,
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "torch_initial_seed": initial_seed,
    }


def _flags() -> dict[str, Any]:
    flags: dict[str, Any] = {"cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}
    torch = sys.modules.get("torch")
    if torch is None:
        flags["reason"] = "torch was not imported"
        return flags
    with warnings.catch_warnings():
        # Reading the TF32 switches is deprecated in recent torch; the values still matter.
        warnings.simplefilter("ignore")
        cudnn = torch.backends.cudnn
        matmul = torch.backends.cuda.matmul
        flags.update(
            {
                "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
                "warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
                "cudnn_deterministic": bool(cudnn.deterministic),
                "cudnn_benchmark": bool(cudnn.benchmark),
                "cudnn_enabled": bool(cudnn.enabled),
                "fill_uninitialized_memory": _fill_uninitialized_memory(torch),
                "float32_matmul_precision": str(torch.get_float32_matmul_precision()),
                "cuda_matmul_allow_tf32": _optional_bool(matmul, "allow_tf32"),
                "cudnn_allow_tf32": _optional_bool(cudnn, "allow_tf32"),
                "cuda_matmul_fp32_precision": _optional_str(matmul, "fp32_precision"),
                "cudnn_fp32_precision": _optional_str(cudnn, "fp32_precision"),
            }
        )
    return flags


def _fill_uninitialized_memory(torch: Any) -> bool | None:
    try:
        import torch.utils.deterministic as deterministic  # the flag: a property of its class

        return bool(deterministic.fill_uninitialized_memory)  # type: ignore[attr-defined]
    except Exception:
        return None


def _optional_bool(owner: Any, name: str) -> bool | None:
    try:
        return bool(getattr(owner, name))
    except Exception:
        return None


def _optional_str(owner: Any, name: str) -> str | None:
    try:
        value = getattr(owner, name)
    except Exception:
        return None
    return None if value is None else str(value)


def _threads() -> dict[str, Any]:
    threads: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "env": {name: os.environ.get(name) for name in THREAD_VARIABLES},
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        threads["torch_num_threads"] = int(torch.get_num_threads())
        threads["torch_num_interop_threads"] = int(torch.get_num_interop_threads())
    return threads


def _gpus() -> dict[str, Any]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    torch = sys.modules.get("torch")
    if torch is None:
        return {"devices": [], "visible_devices": visible, "reason": "torch was not imported"}
    if getattr(torch.version, "cuda", None) is None and getattr(torch.version, "hip", None) is None:
        return {"devices": [], "visible_devices": visible, "reason": "torch is built without CUDA"}
    # Initializing CUDA only to describe it would cost seconds and change the process.
    if not torch.cuda.is_initialized():
        return {
            "devices": [],
            "visible_devices": visible,
            "reason": "CUDA was not initialized in this process",
        }
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        devices.append(
            {
                "index": index,
                "name": str(props.name),
                "uuid": str(uuid) if uuid is not None else None,
                "compute_capability": f"{props.major}.{props.minor}",
                "total_memory": int(props.total_memory),
                "multi_processor_count": int(props.multi_processor_count),
            }
        )
    return {"devices": devices, "visible_devices": visible}
