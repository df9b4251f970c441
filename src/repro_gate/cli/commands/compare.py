"""`repro-gate compare A B`: compare two runs made elsewhere (run directories or manifests).

Used to catch cross-machine drift: run the gate on two runners, then compare what each left.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
from pathlib import Path
from typing import Any

from repro_gate import manifest, notices, probe
from repro_gate.cli.sinks import notices_on_stderr
from repro_gate.compare import provenance, sha256_file
from repro_gate.compare.run_pair import RunSide, check_something_compared, compare_runs
from repro_gate.config import CompareConfig, ToleranceConfig
from repro_gate.config.loader import check_artifact_globs, validate
from repro_gate.config.overrides import parse_tolerance
from repro_gate.errors import EXIT_FAIL, EXIT_PASS, ConfigError, ErrorKind, GateError, printable
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
                        help="only compare artifacts whose path, as the gate recorded it,"
                             " matches this glob (repeatable); a glob that matches nothing"
                             " in either run is an error")
    parser.add_argument("--ignore", action="append", metavar="GLOB:FIELD[,FIELD]",
                        help="do not compare these key paths of JSON/YAML artifacts matching"
                             " GLOB, as compare.ignore does (repeatable), e.g."
                             " 'metrics*.json:finished_at,runs.*.timestamp'")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """`repro-gate compare`: its arguments as `compare`'s parameters; a notice naming a run's
    file (a link out of it) shows its control characters escaped, as the gate's do."""
    with notices.sent_to(notices_on_stderr):
        return compare(Path(args.a), Path(args.b), tolerance=args.tolerance,
                       artifacts=args.artifacts, ignore=args.ignore, as_json=args.json)


def compare(
    a: Path,
    b: Path,
    *,
    tolerance: str = "bitwise",
    artifacts: list[str] | None = None,
    ignore: list[str] | None = None,
    as_json: bool = False,
) -> int:
    """Compare the two sides and print what differs; exit 0 same, 1 different."""
    basis = ToleranceConfig.from_document(parse_tolerance(tolerance))
    check_artifact_globs(artifacts or [])
    side_a = load_side(a, "A")
    side_b = load_side(b, "B")
    if artifacts:
        side_a, side_b = select(side_a, side_b, artifacts)
    comparison = compare_runs([side_a, side_b], basis, ignore_policy(ignore))
    check_something_compared(comparison)
    reasons = verdict.failures(comparison, [])
    outcome = verdict.FAIL if reasons else verdict.PASS
    reasons = reasons or verdict.successes(comparison, 2)
    origins = provenance.mismatches(origin_of(a), origin_of(b))
    if as_json:
        print(json.dumps({"verdict": outcome, "reasons": reasons, "comparison": comparison,
                          "provenance": origins}, indent=2))
    else:
        lines = [f"repro-gate compare: {'same' if outcome == verdict.PASS else 'DIFFERENT'}"]
        lines += [f"  {line}" for line in origins]
        lines += [f"  {r['message']}" for r in reasons]
        lines += console.comparison_lines(comparison)
        # Names come from the runs' files: a control character in one cannot start a line.
        print("\n".join(printable(line) for line in lines))
    return EXIT_PASS if outcome == verdict.PASS else EXIT_FAIL


def ignore_policy(specs: list[str] | None) -> CompareConfig:
    """The `compare` section from `--ignore GLOB:FIELD[,FIELD]` options, checked like a file."""
    rules = []
    for spec in specs or []:
        glob, colon, names = spec.partition(":")
        if not colon:
            raise ConfigError(f"--ignore {spec!r}: must be GLOB:FIELD[,FIELD],"
                              " as in 'metrics*.json:finished_at,host'")
        rules.append({"glob": glob, "fields": [name.strip() for name in names.split(",")]})
    section = {"ignore": rules}
    validate({"compare": section}, source="--ignore")
    return CompareConfig.from_document(section)


def select(a: RunSide, b: RunSide, globs: list[str]) -> tuple[RunSide, RunSide]:
    """The two sides with only the artifacts whose recorded path matches one of `globs`.

    A glob that matches no artifact of either side is an error: comparing nothing must not read
    as "same". One that matches on one side only leaves those files missing on the other, a
    difference the verdict names.
    """
    for glob in globs:
        if not any(glob_matches(glob, rel) for rel in a.paths() | b.paths()):
            known = sorted(a.paths() | b.paths())
            shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5
                                            else "")
            raise GateError(f"-a {glob!r} matches no artifact of run A or run B (their artifacts:"
                            f" {shown or 'none'})", kind=ErrorKind.NO_ARTIFACTS)
    return _selected(a, globs), _selected(b, globs)


def _selected(side: RunSide, globs: list[str]) -> RunSide:
    def keep(rel: str) -> bool:
        return any(glob_matches(glob, rel) for glob in globs)

    return dataclasses.replace(
        side,
        artifacts={rel: path for rel, path in side.artifacts.items() if keep(rel)},
        digests={rel: digest for rel, digest in side.digests.items() if keep(rel)},
        notes={rel: note for rel, note in side.notes.items() if keep(rel)},
    )


def origin_of(path: Path) -> provenance.Provenance | None:
    """The commit and command of a side given as a manifest or an output directory."""
    document = path if path.is_file() else path / manifest.MANIFEST_NAME
    return provenance.of_manifest(manifest.read(document)) if document.is_file() else None


def load_side(path: Path, name: str) -> RunSide:
    """Read one side, every artifact the gate recorded or collects there under the relative
    path it records: a run directory, a gate output directory, or a manifest file."""
    if path.is_file():
        return _from_manifest(manifest.read(path), name)
    if (path / manifest.MANIFEST_NAME).is_file():
        return _from_manifest(manifest.read(path / manifest.MANIFEST_NAME), name,
                              output_dir=path)
    if path.is_dir():
        side = _from_run_dir(path, name)
        if not side.trajectory and not side.artifacts:
            raise GateError(f"{path}: holds no trajectory and no artifacts (not a run directory,"
                            " output directory or manifest?)", kind=ErrorKind.INPUT_INVALID)
        return side
    raise GateError(f"{path}: no such run directory or manifest", kind=ErrorKind.INPUT_MISSING)


def _from_run_dir(run_dir: Path, name: str) -> RunSide:
    return RunSide(name, probe.read_trajectory(run_dir), _collected(run_dir))


def _collected(run_dir: Path) -> dict[str, Path]:
    """Every file the gate collects from a run directory, by the relative path it records for
    it (a file it took from the working directory keeps its path there), whatever the layout."""
    return {a.rel_path: a.path for a in artifacts.collect(run_dir, ["**/*"]).artifacts}


def _from_manifest(
    document: dict[str, Any], name: str, output_dir: Path | None = None
) -> RunSide:
    """The recorded sha256 of each artifact decide; the run directory, where it still holds
    exactly those files, adds the tensor-level detail and the trajectory."""
    deterministic_runs = [r for r in document["runs"] if r["mode"] == "deterministic"]
    if not deterministic_runs:
        raise GateError("the manifest holds no deterministic run to compare",
                        kind=ErrorKind.INPUT_INVALID)
    first = deterministic_runs[0]
    recorded = {a["path"]: a["sha256"] for a in first["artifacts"]}
    candidates = [Path(first["run_dir"])]
    if output_dir is not None:
        candidates.insert(0, output_dir / "runs" / first["name"])
    run_dir = next((c for c in candidates if c.is_dir()), None)
    if run_dir is None:
        return RunSide(name, [], {}, digests=recorded)
    return _verified(run_dir, first, recorded, name)


def _verified(
    run_dir: Path, run: dict[str, Any], recorded: dict[str, str], name: str
) -> RunSide:
    """Files of `run_dir` that still match the manifest; the others known only by sha256."""
    side = RunSide(name, [], {})
    present = _collected(run_dir)
    for rel, digest in recorded.items():
        path = present.get(rel)
        if path is not None and sha256_file(path) == digest:
            side.artifacts[rel] = path
        else:
            side.digests[rel] = digest
            state = "is missing from" if path is None else "no longer matches the manifest in"
            side.notes[rel] = f"run {name}'s file {state} {run_dir}"
    trajectory = probe.read_trajectory(run_dir)
    # A directory whose files changed may have a changed trajectory too: trust neither.
    if not side.digests and len(trajectory) == run.get("steps"):
        side.trajectory = trajectory
    return side


def glob_matches(glob: str, rel_path: str) -> bool:
    """Whether `rel_path` is matched by `glob` as Path.glob would match it from the root."""
    pattern = [part for part in glob.split("/") if part not in ("", ".")]
    return _match_parts(pattern, rel_path.split("/"))


def _match_parts(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_parts(rest, parts[index:]) for index in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match_parts(rest, parts[1:])
