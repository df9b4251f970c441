"""Collect the artifacts of a run by glob from its run directory, its working copy included."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro_gate import notices
from repro_gate.config.model import DEFAULT_RUN_DIR_GLOBS, DEFAULT_WORKDIR_GLOBS
from repro_gate.errors import RunTamperedError
from repro_gate.gate.workcopy import WORK_SUBDIR
from repro_gate.probe import PROBE_SUBDIR, run_files
from repro_gate.suggestions import nearest

NEAREST_SHOWN = 5  # files the run wrote, named beside a glob that matched nothing


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


def globs_for(configured: list[str] | None) -> tuple[list[str], list[str]]:
    """(run-directory globs, working-copy globs) for the configured `artifacts`."""
    if configured:
        return configured, configured
    return list(DEFAULT_RUN_DIR_GLOBS), list(DEFAULT_WORKDIR_GLOBS)


def collect(run_dir: Path, configured: list[str] | None) -> Collection:
    """Artifacts of one run, sorted by relative path, plus configured globs that matched nothing.

    The run directory holds what the run wrote: files under `$REPRO_GATE_RUN_DIR` (the probe's
    own aside), and in `work/` its working copy, which the gate has cut down to the files the
    run wrote (`gate.workcopy`). A file of the working copy keeps its path relative to the
    copy (`model.pt`, `checkpoints/last.pt`). A name in both places is a clash, never settled
    silently: both are collected and compared, the working copy's as `work/<name>`, and a
    warning names both. Only files reached inside the run directory without a link are read:
    a path through a link, or a link resolving elsewhere, is reported on stderr and never
    collected.
    """
    run_globs, work_globs = globs_for(configured)
    matched: set[str] = set()
    outside: list[Path] = []
    found_in: list[dict[str, Path]] = []
    for root, globs in ((run_dir, run_globs), (run_dir / WORK_SUBDIR, work_globs)):
        files: dict[str, Path] = {}
        for pattern in globs:
            hits = _matches(run_dir, root, pattern)
            outside += hits.outside
            for rel, path in hits.files.items():
                files.setdefault(rel, path)
                matched.add(pattern)
        found_in.append(files)
    in_run, in_copy = found_in
    found = dict(in_run)
    for rel, path in in_copy.items():
        if rel in in_run:
            clash = f"{WORK_SUBDIR}/{rel}"
            notices.warning(f"{in_run[rel]} and {path}: the same artifact name in the run"
                            f" directory and the working copy; both are compared, the"
                            f" working copy's as {clash}")
            found[clash] = path
        else:
            found[rel] = path
    unmatched = [p for p in (configured or []) if p not in matched]
    outside = sorted(set(outside))
    for path in outside:
        notices.warning(f"{path} leads outside the run directory (symlink); not collected")
    return Collection([Artifact(rel, found[rel]) for rel in sorted(found)], unmatched, outside)


def written_nearest(run_dir: Path, pattern: str) -> str:
    """What the run wrote, for a glob that matched nothing: the files nearest the glob (a
    misspelt name, a folder the training named otherwise), or that it wrote none."""
    written = written_files(run_dir)
    if not written:
        return "the run wrote no file"
    shown = nearest(pattern, written, NEAREST_SHOWN)
    of = f" ({len(shown)} nearest of {len(written)})" if len(written) > len(shown) else ""
    return f"the run wrote{of}: {', '.join(shown)}"


def written_files(run_dir: Path) -> list[str]:
    """Every file of the run, by the path `collect` gives it: its run directory's (the probe's
    own left out) and its working copy's, which holds only what the run wrote."""
    found: set[str] = set()
    for root in (run_dir, run_dir / WORK_SUBDIR):
        found.update(_matches(run_dir, root, "**/*").files)
    return sorted(found)


def _matches(run_dir: Path, root: Path, pattern: str) -> Matches:
    """Regular files under `root` matching `pattern` (at the top of the run directory, not the
    probe's files nor the working copy); a link, or a path through one, goes to `outside`."""
    matches = Matches()
    if not root.is_dir() or root.is_symlink():
        return matches
    for path in root.glob(pattern):
        rel = path.relative_to(root).as_posix()
        if root == run_dir and rel.partition("/")[0] in (PROBE_SUBDIR, WORK_SUBDIR):
            continue
        if not _inside(path, root) or not _reached_without_link(run_dir, path):
            matches.outside.append(path)
            continue
        if path.is_file() and not path.is_symlink():  # a link to a file of the run: that file
            matches.files.setdefault(rel, path)
    return matches


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def _reached_without_link(run_dir: Path, path: Path) -> bool:
    """Whether every folder from `run_dir` down to `path` is a real folder, no link."""
    try:
        run_files.names(run_dir, path.parent.relative_to(run_dir).as_posix())
    except (RunTamperedError, OSError):
        return False
    return True
