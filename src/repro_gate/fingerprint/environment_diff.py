"""What changed between two environments, by category, in words a person acts on."""

from __future__ import annotations

from typing import Any

from repro_gate.fingerprint.identity import config_hash, identity

CATEGORIES = ("code", "data", "env", "random", "hardware")
MAX_NAMED = 5  # packages or files named in one line before "..."
# Facts whose absence means "not set" rather than "not known".
UNSET_WORDING = ("random.seed", "random.seeded_by_training", "random.cublas_workspace_config")

LABELS = {
    "code.commit": "commit",
    "code.dirty": "working tree",
    "code.diff_sha256": "uncommitted changes",
    "env.image.id": "image ID",
    "env.image.digests": "image digest",
    "env.image.reference": "image",
    "env.python": "python",
    "env.implementation": "python implementation",
    "env.os": "OS",
    "env.libc": "libc",
    "env.machine": "architecture",
    "env.torch": "torch",
    "env.torch_git": "torch git version",
    "env.cuda_build": "CUDA (torch build)",
    "env.hip": "HIP (torch build)",
    "env.cudnn": "cuDNN",
    "env.nccl": "NCCL",
    "env.numpy": "numpy",
    "random.seed": "seed supplied by the gate",
    "random.seeded_by_training": "generators the training seeds",
    "random.deterministic_algorithms": "deterministic algorithms",
    "random.warn_only": "deterministic warn-only",
    "random.cudnn_deterministic": "cuDNN deterministic",
    "random.cudnn_benchmark": "cuDNN benchmark",
    "random.cudnn_enabled": "cuDNN enabled",
    "random.fill_uninitialized_memory": "fill uninitialized memory",
    "random.cublas_workspace_config": "CUBLAS_WORKSPACE_CONFIG",
    "random.float32_matmul_precision": "float32 matmul precision",
    "random.cuda_matmul_allow_tf32": "TF32 for CUDA matmul",
    "random.cudnn_allow_tf32": "TF32 for cuDNN",
    "random.cuda_matmul_fp32_precision": "CUDA matmul fp32 precision",
    "random.cudnn_fp32_precision": "cuDNN fp32 precision",
    "random.torch_num_threads": "torch threads",
    "random.torch_num_interop_threads": "torch inter-op threads",
    "hardware.cpu_model": "CPU",
    "hardware.cpu_count": "CPU count",
    "hardware.driver_version": "driver",
    "hardware.cuda_driver_version": "CUDA driver",
}


def environment_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Changes from `old` to `new` (manifests, fingerprint documents or fingerprint sections)."""
    old_fp, new_fp = fingerprint_of(old), fingerprint_of(new)
    a, b = identity(old_fp), identity(new_fp)
    changes: list[dict[str, Any]] = []
    changes += _scalar_changes("code", a["code"], b["code"])
    changes += _data_changes(old_fp, new_fp)
    env_a = {k: v for k, v in a["env"].items() if k not in ("packages", "lockfiles", "image")}
    env_b = {k: v for k, v in b["env"].items() if k not in ("packages", "lockfiles", "image")}
    changes += _scalar_changes("env", {"image": a["env"]["image"], **env_a},
                               {"image": b["env"]["image"], **env_b})
    changes += _package_changes(a["env"]["packages"], b["env"]["packages"])
    changes += _lockfile_changes(old_fp, new_fp)
    changes += _scalar_changes("random", a["random"], b["random"])
    hw_a = {k: v for k, v in a["hardware"].items() if k != "gpus"}
    hw_b = {k: v for k, v in b["hardware"].items() if k != "gpus"}
    changes += _scalar_changes("hardware", hw_a, hw_b)
    changes += _gpu_changes(a["hardware"]["gpus"], b["hardware"]["gpus"])
    old_hash, new_hash = config_hash(old_fp), config_hash(new_fp)
    return {
        "equal": not changes,
        "old_config_hash": old_hash,
        "new_config_hash": new_hash,
        "changes": changes,
        "counts": {category: sum(1 for c in changes if c["category"] == category)
                   for category in CATEGORIES},
    }


def diff_lines(environment_diff: dict[str, Any]) -> list[str]:
    """One line per change: `env: torch 2.3.1 -> 2.4.0`."""
    return [f"{change['category']}: {change['message']}" for change in environment_diff["changes"]]


def fingerprint_of(document: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint inside a manifest or a `repro-gate fingerprint --json` document."""
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if "fingerprint" in document:
        fingerprint = document["fingerprint"]
        if not isinstance(fingerprint, dict):
            raise ValueError("its 'fingerprint' is not an object")
        return fingerprint
    if all(key in document for key in ("code", "env", "hardware")):
        return document
    if "schema_version" in document:
        raise ValueError(
            f"manifest (schema_version {document['schema_version']}) has no fingerprint"
        )
    raise ValueError("neither a repro-gate manifest nor a fingerprint")


def _scalar_changes(category: str, a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    changes = []
    flat_a, flat_b = _flatten(a, category), _flatten(b, category)
    for key in sorted(set(flat_a) | set(flat_b)):
        old, new = flat_a.get(key), flat_b.get(key)
        if old != new:
            changes.append(_change(category, key, old, new, _scalar_message(key, old, new)))
    return changes


def _scalar_message(key: str, old: Any, new: Any) -> str:
    if key == "code.dirty":
        return f"working tree {_tree(old)} -> {_tree(new)}"
    if key == "code.diff_sha256":
        return "uncommitted changes differ"
    if key == "code.commit":
        return f"commit {_short(old)} -> {_short(new)}"
    if key.startswith("random.thread_env."):
        label = key.removeprefix("random.thread_env.")
    else:
        label = LABELS.get(key, key.split(".", 1)[-1])
    if key == "env.image.digests":
        return f"image digest {_list(old)} -> {_list(new)}"
    missing = "unset" if key in UNSET_WORDING or key.startswith("random.thread_env.") else "unknown"
    return f"{label} {_value(old, missing)} -> {_value(new, missing)}"


def _data_changes(old_fp: dict[str, Any], new_fp: dict[str, Any]) -> list[dict[str, Any]]:
    old = {e["path"]: e for e in (old_fp.get("data") or {}).get("paths", [])}
    new = {e["path"]: e for e in (new_fp.get("data") or {}).get("paths", [])}
    changes = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            message = f"{path} {'added' if a is None else 'removed'}"
        elif (a.get("sha256"), a.get("bytes"), a.get("files")) == (
                b.get("sha256"), b.get("bytes"), b.get("files")):
            continue
        else:
            message = f"{path} {_file_changes(a, b)}"
        changes.append(_change("data", f"data.{path}", _data_value(a), _data_value(b), message))
    return changes


def _file_changes(a: dict[str, Any], b: dict[str, Any]) -> str:
    files_a, files_b = a.get("file_sha256"), b.get("file_sha256")
    if a.get("sha256") is None or b.get("sha256") is None:
        return "not hashed on one side"
    if not isinstance(files_a, dict) or not isinstance(files_b, dict):
        return f"content changed ({a.get('files')} -> {b.get('files')} files)"
    changed = sorted(n for n in files_a.keys() & files_b.keys() if files_a[n] != files_b[n])
    added = sorted(files_b.keys() - files_a.keys())
    removed = sorted(files_a.keys() - files_b.keys())
    parts = []
    for count, verb, names in ((len(changed), "changed", changed), (len(added), "added", added),
                               (len(removed), "removed", removed)):
        if count:
            parts.append(f"{count} {'file' if count == 1 else 'files'} {verb} ({_names(names)})")
    return ", ".join(parts) or "content changed"


def _package_changes(old: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
    line = _version_changes(old, new)
    if not line:
        return []
    return [_change("env", "env.packages", len(old), len(new), f"installed packages: {line}")]


def _lockfile_changes(old_fp: dict[str, Any], new_fp: dict[str, Any]) -> list[dict[str, Any]]:
    old = {lf["path"]: lf for lf in (old_fp.get("env") or {}).get("lockfiles") or []}
    new = {lf["path"]: lf for lf in (new_fp.get("env") or {}).get("lockfiles") or []}
    changes = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a is not None and b is not None and a["sha256"] == b["sha256"]:
            continue
        if a is None or b is None:
            message = f"lockfile {path} {'added' if a is None else 'removed'}"
        else:
            pins = _version_changes(_pin_text(a.get("pins")), _pin_text(b.get("pins")))
            message = f"lockfile {path}: {pins or 'content changed, same pins'}"
        changes.append(_change("env", f"env.lockfiles.{path}", a and a["sha256"],
                               b and b["sha256"], message))
    return changes


def _gpu_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if old == new:
        return []
    message = f"GPUs {_gpu_summary(old)} -> {_gpu_summary(new)}"
    return [_change("hardware", "hardware.gpus", old, new, message)]


def _gpu_summary(gpus: list[dict[str, Any]]) -> str:
    if not gpus:
        return "none"
    counts: dict[str, int] = {}
    for gpu in gpus:
        extras = [f"{gpu.get('memory_mib')} MiB"]
        if gpu.get("mig_mode") not in (None, "disabled", "not supported"):
            extras.append(f"MIG {gpu.get('mig_mode')}")
        if gpu.get("ecc_mode") not in (None, "not supported"):
            extras.append(f"ECC {gpu.get('ecc_mode')}")
        text = f"{gpu.get('name')} (sm {gpu.get('compute_capability')}, {', '.join(extras)})"
        counts[text] = counts.get(text, 0) + 1
    return " + ".join(f"{count}x {text}" for text, count in counts.items())


def _version_changes(old: dict[str, str], new: dict[str, str]) -> str:
    """`3 packages changed (numpy 1.26.4 -> 2.0.1, ...), 1 added (rich 13.7.1)`, or ''."""
    changed = sorted(n for n in old.keys() & new.keys() if old[n] != new[n])
    added = sorted(new.keys() - old.keys())
    removed = sorted(old.keys() - new.keys())
    parts = []
    if changed:
        items = [f"{n} {old[n]} -> {new[n]}" for n in changed]
        parts.append(f"{_count(changed)} changed ({_names(items)})")
    if added:
        parts.append(f"{_count(added)} added ({_names([f'{n} {new[n]}' for n in added])})")
    if removed:
        parts.append(f"{_count(removed)} removed ({_names([f'{n} {old[n]}' for n in removed])})")
    return ", ".join(parts)


def _pin_text(pins: dict[str, list[str]] | None) -> dict[str, str]:
    return {name: " | ".join(versions) for name, versions in (pins or {}).items()}


def _change(category: str, field: str, old: Any, new: Any, message: str) -> dict[str, Any]:
    return {"category": category, "field": field, "old": old, "new": new, "message": message}


def _data_value(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {key: entry.get(key) for key in ("sha256", "bytes", "files")}


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    """Leaves by dotted key; an empty mapping has none (its first key is the change, alone)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def _count(items: list[str]) -> str:
    return f"{len(items)} {'package' if len(items) == 1 else 'packages'}"


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    return shown + (", ..." if len(items) > MAX_NAMED else "")


def _value(value: Any, missing: str) -> str:
    if value is None:
        return missing
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _list(values: Any) -> str:
    return ", ".join(values) if values else "none"


def _tree(dirty: Any) -> str:
    return {True: "dirty", False: "clean"}.get(dirty, "unknown")


def _short(commit: Any) -> str:
    return str(commit)[:12] if commit else "none"
