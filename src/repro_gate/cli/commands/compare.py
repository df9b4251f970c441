"""`repro-gate compare A B`: compare two runs made elsewhere (run directories or manifests).

Used to catch cross-machine drift: run the gate on two runners, then compare what each left.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from repro_gate import manifest, probe
from repro_gate.compare.runs import RunSide, check_something_compared, compare_runs
from repro_gate.config import ToleranceConfig
from repro_gate.config.overrides import parse_tolerance
from repro_gate.errors import EXIT_FAIL, EXIT_PASS, ErrorKind, GateError
from repro_gate.gate import collect as artifacts
from repro_gate.gate import verdict
from repro_gate.render import console

EPILOG = """\
each side is one of: a run directory (holding .repro-gate/ and the artifacts), a gate output
directory (holding manifest.json and runs/), or a manifest.json file. With run directories the
comparison is step by step and tensor by tensor; with manifests alone, artifacts are compared by
their sha256. exit codes: 0 same, 1 different, 2 bad input.
"""


def add_parser(subparsers: Any, name: str) -> None:
    """Register `compare`."""
    parser = subparsers.add_parser(
        name, help="compare two runs made elsewhere (run directories or manifests)",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A",
                        help="first run: run directory, output directory or manifest")
    parser.add_argument("b", metavar="B", help="second run, same kinds as A")
    parser.add_argument("--tolerance", metavar="SPEC", default="bitwise",
                        help="'bitwise' (default) or 'atol=X,rtol=Y'")
    parser.add_argument("-a", "--artifacts", action="append", metavar="GLOB",
                        help="only compare files matching this glob (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Compare the two sides and print what differs; exit 0 same, 1 different."""
    tolerance = ToleranceConfig.from_document(parse_tolerance(args.tolerance))
    side_a = load_side(Path(args.a), "A", args.artifacts)
    side_b = load_side(Path(args.b), "B", args.artifacts)
    comparison = compare_runs([side_a, side_b], tolerance)
    check_something_compared(comparison)
    reasons = verdict.failures(comparison, [])
    outcome = verdict.FAIL if reasons else verdict.PASS
    reasons = reasons or verdict.successes(comparison, 2)
    if args.json:
        print(json.dumps({"verdict": outcome, "reasons": reasons, "comparison": comparison},
                         indent=2))
    else:
        print(f"repro-gate compare: {'same' if outcome == verdict.PASS else 'DIFFERENT'}")
        print("\n".join(f"  {r['message']}" for r in reasons))
        print("\n".join(console.comparison_lines(comparison)))
    return EXIT_PASS if outcome == verdict.PASS else EXIT_FAIL


def load_side(path: Path, name: str, globs: list[str] | None) -> RunSide:
    """Read one side: a run directory, a gate output directory, or a manifest file."""
    if path.is_file():
        return _from_manifest(manifest.read(path), name, globs)
    if (path / manifest.MANIFEST_NAME).is_file():
        return _from_manifest(manifest.read(path / manifest.MANIFEST_NAME), name, globs,
                              output_dir=path)
    if path.is_dir():
        return _from_run_dir(path, name, globs)
    raise GateError(f"{path}: no such run directory or manifest", kind=ErrorKind.INPUT_MISSING)


def _from_run_dir(run_dir: Path, name: str, globs: list[str] | None) -> RunSide:
    sources = artifacts.Sources(run_dir, workdir=None, exclude=run_dir)
    found = artifacts.collect(sources, globs, before={}).artifacts
    return RunSide(name, probe.read_trajectory(run_dir), {a.rel_path: a.path for a in found})


def _from_manifest(
    document: dict[str, Any], name: str, globs: list[str] | None, output_dir: Path | None = None
) -> RunSide:
    deterministic_runs = [r for r in document["runs"] if r["mode"] == "deterministic"]
    if not deterministic_runs:
        raise GateError("the manifest holds no deterministic run to compare",
                        kind=ErrorKind.INPUT_INVALID)
    first = deterministic_runs[0]
    candidates = [Path(first["run_dir"])]
    if output_dir is not None:
        candidates.insert(0, output_dir / "runs" / first["name"])
    for run_dir in candidates:
        if run_dir.is_dir():
            return _from_run_dir(run_dir, name, globs)
    return _from_hashes(first, name)


def _from_hashes(run: dict[str, Any], name: str) -> RunSide:
    """A side whose artifacts are known only by their sha256 in the manifest."""
    return RunSide(name, [], {}, digests={a["path"]: a["sha256"] for a in run["artifacts"]})
