"""Collect the artifacts of a run by glob: its run directory and, when local, the workdir."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from repro_gate.gate.lock import LOCK_NAMES, OUTPUT_LOCK
from repro_gate.probe import PROBE_SUBDIR

# Files moved out of the working directory land here inside the run directory.
FROM_WORKDIR_SUBDIR = ".workdir"

# Collected when `artifacts` is not configured: everything the run wrote into its run directory,
# and checkpoint-like files it wrote at the top of the working directory.
DEFAULT_RUN_DIR_GLOBS = ["**/*"]
DEFAULT_WORKDIR_GLOBS = ["*.pt", "*.pth", "*.ckpt", "*.safetensors", "*.bin"]


@dataclass(frozen=True)
class Artifact:
    """One collected file: its path relative to where it was found, and where it is now."""

    rel_path: str
    path: Path


@dataclass
class Collection:
    artifacts: list[Artifact]
    unmatched_globs: list[str] = field(default_factory=list)
    outside: list[Path] = field(default_factory=list)  # symlinks out of the run: never read


@dataclass
class Matches:
    """Files a set of globs found under one root, and the links that lead out of it."""

    files: dict[str, Path] = field(default_factory=dict)  # relative path -> file
    outside: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Sources:
    """Where a run's artifacts are looked for."""

    run_dir: Path
    workdir: Path | None  # None for container runs: the workspace is read-only there
    exclude: Path  # the gate's output directory, never collected from the working directory


def globs_for(configured: list[str] | None) -> tuple[list[str], list[str]]:
    """(run-directory globs, working-directory globs) for the configured `artifacts`."""
    if configured:
        return configured, configured
    return DEFAULT_RUN_DIR_GLOBS, DEFAULT_WORKDIR_GLOBS


def snapshot(workdir: Path, globs: list[str], exclude: Path) -> dict[str, int]:
    """Files in the working directory matching the globs before a run, with their mtimes."""
    found = _matches(workdir, globs, exclude).files
    return {rel: path.stat().st_mtime_ns for rel, path in found.items()}


def collect(sources: Sources, configured: list[str] | None, before: dict[str, int]) -> Collection:
    """Artifacts of one run, sorted by relative path, plus configured globs that matched nothing.

    Files the run wrote into the working directory (new, or changed since `before`) are moved
    into the run directory so that the next run starts without them; files it did not touch
    stay where they are. Only files inside the run directory or the working directory are
    ever read or moved: a symlink resolving elsewhere is reported on stderr and left alone.
    The gate's lock files and the output directories of other gates are never collected.
    """
    run_globs, workdir_globs = globs_for(configured)
    found: dict[str, Path] = {}
    matched: set[str] = set()
    outside: list[Path] = []
    for pattern in run_globs:
        hits = _matches(sources.run_dir, [pattern], exclude=None)
        outside += hits.outside
        for rel, path in hits.files.items():
            top, _, rest = rel.partition("/")
            if top == PROBE_SUBDIR:
                continue
            # Files moved in from the working directory keep their original relative path.
            found.setdefault(rest if top == FROM_WORKDIR_SUBDIR else rel, path)
            matched.add(pattern)
    if sources.workdir is not None:
        for pattern in workdir_globs:
            hits = _matches(sources.workdir, [pattern], sources.exclude)
            outside += hits.outside
            for rel, path in hits.files.items():
                if before.get(rel) == path.stat().st_mtime_ns:
                    continue
                matched.add(pattern)
                if rel not in found:
                    found[rel] = _move_into(path, sources.run_dir / FROM_WORKDIR_SUBDIR / rel)
    unmatched = [p for p in (configured or []) if p not in matched]
    outside = sorted(set(outside))
    for path in outside:
        print(f"repro-gate: warning: {path} leads outside the run directory and the working"
              " directory (symlink); not collected", file=sys.stderr)
    return Collection([Artifact(rel, found[rel]) for rel in sorted(found)], unmatched, outside)


def _move_into(path: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), target)
    return target


def _matches(root: Path, globs: list[str], exclude: Path | None) -> Matches:
    """Regular files under `root` matching `globs`, except lock files, `exclude` and the
    output directories of other gates; symlinks resolving outside `root` go to `outside`."""
    matches = Matches()
    if not root.is_dir():
        return matches
    foreign = _OutputDirs(root)
    for pattern in globs:
        for path in root.glob(pattern):
            if not _inside(path, root):
                matches.outside.append(path)
                continue
            if not path.is_file() or path.is_symlink() or path.name in LOCK_NAMES:
                continue
            if (exclude is not None and _inside(path, exclude)) or foreign.holds(path):
                continue
            matches.files.setdefault(path.relative_to(root).as_posix(), path)
    return matches


class _OutputDirs:
    """Which directories below a root are another gate's output directory (its lock file
    marks it): what the other gate writes there is never this run's artifact."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.known: dict[Path, bool] = {}

    def holds(self, path: Path) -> bool:
        """True when a directory between the root (excluded) and `path` is an output dir."""
        return any(self._is_output_dir(parent) for parent in path.relative_to(self.root).parents
                   if parent != Path("."))

    def _is_output_dir(self, relative: Path) -> bool:
        if relative not in self.known:
            self.known[relative] = (self.root / relative / OUTPUT_LOCK).is_file()
        return self.known[relative]


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True
