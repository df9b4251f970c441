"""`repro-gate bless`: write or update the golden trajectory of this machine class from a
passing gate's manifest (docs/golden.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from repro_gate import config as config_loader
from repro_gate.errors import EXIT_PASS
from repro_gate.golden.bless import bless as write_golden
from repro_gate.golden.select import shown
from repro_gate.manifest import MANIFEST_NAME


def add_parser(subparsers: Any, name: str) -> None:
    """Register `bless`."""
    parser = subparsers.add_parser(
        name,
        help="write the golden trajectory of this machine class from a passing gate",
        description="Write (or update) the golden file of the manifest's machine class: the file"
        " `golden` names, or <class>.json in its folder (default .repro-gate/golden/). Exit 0"
        " when written, 4 when the manifest's runs did not reproduce or none of their steps was"
        " observed, 2 on bad input.",
    )
    parser.add_argument("--manifest", type=Path,
                        help="manifest.json of a passing gate (default: the last gate's, in the"
                             " output directory)")
    parser.add_argument("--config", type=Path, help="config file (default .repro-gate.yml)")
    parser.add_argument("--golden", metavar="PATH",
                        help="golden file, or folder of one file per machine class")


def run(args: argparse.Namespace) -> int:
    """`repro-gate bless`: its flags as `bless`'s parameters."""
    return bless(args.manifest, args.config, args.golden)


def bless(manifest_path: Path | None, config_path: Path | None, golden: str | None) -> int:
    """Write the golden file and say how to commit it."""
    overrides = {"golden": {"path": golden}} if golden else {}
    config = config_loader.load(config_path, overrides, Path.cwd())
    blessed = write_golden(config, manifest_path or config.output_dir / MANIFEST_NAME)
    where = shown(blessed.path, Path.cwd())
    verb = "updated" if blessed.updated else "wrote"
    steps = len(blessed.document["steps"])
    artifacts = len(blessed.document["artifacts"])
    print(f"repro-gate: {verb} {where} (machine class {blessed.document['machine_class']},"
          f" {steps} steps, {artifacts} artifacts)")
    print(f"  commit it: git add {where} && git commit -m 'Bless the golden trajectory'")
    return EXIT_PASS
