"""Collect the artifacts of a run by glob: its run directory and, when local, the workdir."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

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
    found = _matches(workdir, globs, exclude)
    return {rel: path.stat().st_mtime_ns for rel, path in found.items()}


def collect(sources: Sources, configured: list[str] | None, before: dict[str, int]) -> Collection:
    """Artifacts of one run, sorted by relative path, plus configured globs that matched nothing.

    Files the run wrote into the working directory (new, or changed since `before`) are moved
    into the run directory so that the next run starts without them; files it did not touch
    stay where they are.
    """
    run_globs, workdir_globs = globs_for(configured)
    found: dict[str, Path] = {}
    matched: set[str] = set()
    for pattern in run_globs:
        hits = _matches(sources.run_dir, [pattern], exclude=None)
        for rel, path in hits.items():
            top, _, rest = rel.partition("/")
            if top == PROBE_SUBDIR:
                continue
            # Files moved in from the working directory keep their original relative path.
            found.setdefault(rest if top == FROM_WORKDIR_SUBDIR else rel, path)
            matched.add(pattern)
    if sources.workdir is not None:
        for pattern in workdir_globs:
            for rel, path in _matches(sources.workdir, [pattern], sources.exclude).items():
                if before.get(rel) == path.stat().st_mtime_ns:
                    continue
                matched.add(pattern)
                if rel not in found:
                    found[rel] = _move_into(path, sources.run_dir / FROM_WORKDIR_SUBDIR / rel)
    unmatched = [p for p in (configured or []) if p not in matched]
    return Collection([Artifact(rel, found[rel]) for rel in sorted(found)], unmatched)


def _move_into(path: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), target)
    return target


def _matches(root: Path, globs: list[str], exclude: Path | None) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    for pattern in globs:
        for path in root.glob(pattern):
            if not path.is_file() or path.is_symlink():
                continue
            if exclude is None or not _inside(path, exclude):
                found.setdefault(path.relative_to(root).as_posix(), path)
    return found


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True
