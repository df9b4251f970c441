"""`repro-gate fingerprint`: the environment fingerprint and config_hash, without training."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from repro_gate import __version__, config
from repro_gate.cli.output import print_document
from repro_gate.config import Config
from repro_gate.fingerprint.assemble import build_fingerprint
from repro_gate.fingerprint.host import collect_host
from repro_gate.fingerprint.identity import config_hash
from repro_gate.gate import file_lock
from repro_gate.probe import INJECT_DIR

DOCUMENT_FORMAT = 1
LOCAL_RUN = "local"  # name of this interpreter among the in-process fingerprints


def add_parser(subparsers: Any, name: str) -> None:
    """Register `fingerprint`."""
    parser = subparsers.add_parser(
        name,
        help="print the environment fingerprint and config_hash (no training)",
        description="Print the environment fingerprint (code, data, env, random state and "
        "numerics, hardware) and its config_hash, as seen from this machine and interpreter.",
    )
    parser.add_argument("--config", type=Path, help="config file (default: .repro-gate.yml here)")
    parser.add_argument("--json", action="store_true", help="print the document as JSON")
    parser.add_argument("--no-hash-data", action="store_true",
                        help="check that the `data` paths exist without hashing them")


def run(args: argparse.Namespace) -> int:
    """`repro-gate fingerprint`: its flags as `fingerprint`'s parameters."""
    return fingerprint(args.config, hash_data_files=not args.no_hash_data, as_json=args.json)


def fingerprint(config_path: Path | None, *, hash_data_files: bool = True,
                as_json: bool = False) -> int:
    """Collect and print; exit 0, or 2 on a bad config."""
    effective = config.load(config_path, {}, Path.cwd())
    document = fingerprint_document(effective, hash_data_files=hash_data_files)
    print_document(document, as_json, describe)
    return 0


def fingerprint_document(effective: Config, *, hash_data_files: bool = True
                         ) -> dict[str, Any]:
    """Host facts plus this interpreter's in-process facts, with their config_hash."""
    host = collect_host(effective.data, effective.workdir, hash_data_files=hash_data_files,
                        gate_files=file_lock.gate_files(effective))
    fingerprint = build_fingerprint(effective, host, {LOCAL_RUN: local_in_process()}, image=None)
    return {
        "repro_gate_fingerprint": DOCUMENT_FORMAT,
        "tool": {"name": "repro-gate", "version": __version__},
        "config_hash": config_hash(fingerprint),
        "fingerprint": fingerprint,
    }


def local_in_process(import_torch: bool = True) -> dict[str, Any]:
    """What this interpreter tells about itself, through the probe's own in-process module."""
    if str(INJECT_DIR) not in sys.path:
        sys.path.append(str(INJECT_DIR))
    import _repro_gate_fingerprint

    return _repro_gate_fingerprint.collect(import_torch=import_torch)


def describe(document: dict[str, Any]) -> list[str]:
    """A few lines per category for the console."""
    fp = document["fingerprint"]
    code, data, env, random, hw = (fp["code"], fp["data"], fp["env"], fp["random"],
                                   fp["hardware"])
    flags = random.get("flags") or {}
    lines = [f"config_hash  {document['config_hash']}"]
    if code.get("commit"):
        state = "dirty" if code.get("dirty") else "clean"
        lines.append(f"code      {code['commit'][:12]} on {code.get('ref')} ({state}),"
                     f" remote {code.get('remote_url') or 'none'}")
    else:
        lines.append(f"code      unknown: {code.get('reason')}")
    if data.get("paths"):
        for entry in data["paths"]:
            digest = entry.get("sha256") or entry.get("error") or entry.get("note")
            lines.append(f"data      {entry['path']}: {entry.get('files', 0)} files,"
                         f" {entry.get('bytes', 0)} bytes, {digest}")
    else:
        lines.append("data      no data paths configured")
    image = env.get("image") or {}
    lines.append(f"env       image {image.get('reference') or 'none'}"
                 f" ({image.get('reason') or image.get('id')})")
    lines.append(f"env       python {env.get('python')}, {env.get('os')}, {env.get('libc')}")
    lines.append(f"env       torch {env.get('torch')} (CUDA {env.get('cuda_build')},"
                 f" cuDNN {env.get('cudnn')}, NCCL {env.get('nccl')}), numpy {env.get('numpy')}")
    packages = env.get("packages") or {}
    lines.append(f"env       {packages.get('count', 0)} installed packages"
                 f" (sha256 {str(packages.get('sha256'))[:12]})")
    for lockfile in env.get("lockfiles") or []:
        state = lockfile.get("error") or lockfile.get("note") or (
            "hash-pinned" if lockfile.get("hash_pinned") else "no artifact hashes")
        lines.append(f"env       lockfile {lockfile['path']} ({lockfile['format']},"
                     f" {lockfile.get('packages', 0)} packages): {state}")
    if not env.get("lockfiles"):
        lines.append("env       no lockfile found")
    for mismatch in env.get("lock_mismatches") or []:
        lines.append(f"env       {mismatch['name']} {mismatch['installed']} installed,"
                     f" {' | '.join(mismatch['locked'])} locked in {mismatch['lockfile']}")
    seed = random.get("seed")
    lines.append(f"random    gate seed {'none' if seed is None else seed}, PYTHONHASHSEED"
                 f" {random.get('pythonhashseed') or 'unset'}, deterministic algorithms"
                 f" {flags.get('deterministic_algorithms')}, cuDNN benchmark"
                 f" {flags.get('cudnn_benchmark')}, CUBLAS_WORKSPACE_CONFIG"
                 f" {flags.get('cublas_workspace_config') or 'unset'}")
    cpu = hw.get("cpu") or {}
    lines.append(f"hardware  CPU {cpu.get('model')} x{cpu.get('count')}")
    for gpu in hw.get("gpus") or []:
        lines.append(f"hardware  GPU {gpu.get('index')}: {gpu.get('name')} (sm"
                     f" {gpu.get('compute_capability')}, {gpu.get('memory_mib')} MiB,"
                     f" MIG {gpu.get('mig_mode')}, ECC {gpu.get('ecc_mode')})")
    if hw.get("gpus"):
        lines.append(f"hardware  driver {hw.get('driver_version')},"
                     f" CUDA driver {hw.get('cuda_driver_version')}")
    else:
        lines.append(f"hardware  no GPU: {hw.get('gpu_reason')}")
    return lines
