"""`repro-gate doctor`: the static part of the reproducibility checklist, without training."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from repro_gate import config
from repro_gate.cli.commands.fingerprint import LOCAL_RUN, local_in_process
from repro_gate.cli.output import print_document
from repro_gate.config import Config
from repro_gate.errors import EXIT_FAIL, EXIT_PASS
from repro_gate.fingerprint.assemble import build_fingerprint
from repro_gate.fingerprint.checklist import evaluate
from repro_gate.fingerprint.host import collect_host
from repro_gate.gate import file_lock


def add_parser(subparsers: Any, name: str) -> None:
    """Register `doctor`."""
    parser = subparsers.add_parser(
        name,
        help="check the project against the reproducibility checklist (no training)",
        description="Evaluate the reproducibility checklist items that need no run: image"
        " pinning, lockfiles, installed packages, working tree, data paths, seed. Exit 0 when"
        " no item fails, 1 when some fail, 2 on bad input.",
    )
    parser.add_argument("--config", type=Path, help="config file (default: .repro-gate.yml here)")
    parser.add_argument("--json", action="store_true", help="print the checklist as JSON")
    parser.add_argument("--hash-data", action="store_true",
                        help="also checksum the `data` paths (slow on large data)")


def run(args: argparse.Namespace) -> int:
    """`repro-gate doctor`: its flags as `doctor`'s parameters."""
    return doctor(args.config, hash_data_files=args.hash_data, as_json=args.json)


def doctor(config_path: Path | None, *, hash_data_files: bool = False,
           as_json: bool = False) -> int:
    """Print the checklist; 0 when nothing fails, 1 otherwise, 2 (GateError) on bad input."""
    effective = config.load(config_path, {}, Path.cwd())
    checklist = diagnose(effective, hash_data_files=hash_data_files)
    document = {"config_file": effective.as_document()["config_file"], "checklist": checklist}
    print_document(document, as_json, lambda doc: describe(doc["checklist"]))
    return EXIT_FAIL if checklist["counts"]["fail"] else EXIT_PASS


def diagnose(effective: Config, *, hash_data_files: bool) -> dict[str, Any]:
    """The static checklist for an effective configuration."""
    host = collect_host(effective.data, effective.workdir, hash_data_files=hash_data_files,
                        gate_files=file_lock.gate_files(effective))
    # torch is not imported: its flags only matter inside a run, and importing it costs seconds.
    in_process: dict[str, dict[str, Any] | None] = {
        LOCAL_RUN: local_in_process(import_torch=False)}
    fingerprint = build_fingerprint(effective, host, in_process, image=None)
    return evaluate(fingerprint, effective, in_process, static=True)


def describe(checklist: dict[str, Any]) -> list[str]:
    """One line per item, its fix under it when it does not pass, and a summary."""
    counts = checklist["counts"]
    lines = [f"repro-gate doctor: {counts['pass']} pass, {counts['warn']} warn,"
             f" {counts['fail']} fail, {counts['deferred']} checked during a run"]
    for item in checklist["items"]:
        lines.append(f"{item['status'].upper():<8} {item['category']:<8} {item['title']}:"
                     f" {item['detail']}")
        if item.get("fix") and item["status"] in ("warn", "fail"):
            lines.append(f"{'':<17} fix: {item['fix']}")
    return lines
