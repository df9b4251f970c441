"""The candidate lock: the baseline upgraded by uv in a scratch copy of the project, or given.

The user's files are only read: the project is copied into a fresh directory under `scratch`
and uv writes the candidate lock there, where it stays (the report names it, and the weekly
workflow proposes it as the upgrade).

- uv.lock: `uv lock --upgrade` or `--upgrade-package NAME` (repeatable) in the copy.
- A pinned requirements file: `uv pip compile --upgrade` from its source, `X.in` next to `X.txt`
  or `pyproject.toml` (with every extra when the lock pins one of them); without a source, from
  the pins themselves, those to upgrade relaxed to bare names first, since compiling pinned
  lines changes nothing (upgrading everything relaxes the direct pins and leaves out the
  transitive ones, which are then resolved afresh).
- `--candidate-lock PATH`: read as it is (the lock of a Dependabot or Renovate pull request).

A candidate that does not resolve is a LOCK_UNRESOLVABLE GateError with uv's last error line.
The copy leaves out what resolving never reads and can be large: version control, virtual
environments, caches, the gate's output and files over MAX_COPIED_BYTES (data, checkpoints).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from repro_gate import parsing
from repro_gate.environments.dependency_lock import (
    Lock,
    optional_names,
    read_lock,
    requirements_source,
)
from repro_gate.environments.installer import run_tool, tool_error, uv_binary
from repro_gate.errors import ConfigError, ErrorKind, MissingDependencyError
from repro_gate.fingerprint.lockfiles import canonical_name, requirements_via

MAX_COPIED_BYTES = 16 * 1024 * 1024
NOT_COPIED = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
                        "repro-gate-out"})
RELAXED_INPUT = "repro-gate-relaxed.in"  # the compile input written when there is no source


@dataclass(frozen=True)
class UpgradeRequest:
    """What to upgrade: every package, or only the named ones (`--upgrade-package`)."""

    packages: tuple[str, ...] = ()  # empty: every package

    @property
    def everything(self) -> bool:
        return not self.packages

    def flags(self) -> list[str]:
        """uv's flags for this request (`uv lock`, `uv pip compile`)."""
        if self.everything:
            return ["--upgrade"]
        return [flag for name in self.packages for flag in ("--upgrade-package", name)]


def given_candidate(path: Path, baseline: Lock) -> Lock:
    """A candidate lock from a file (`--candidate-lock`), in the baseline's format unless its
    name says otherwise."""
    return read_lock(path, role="candidate lock", fmt=baseline.format)


def compute_candidate(baseline: Lock, request: UpgradeRequest, scratch: Path, *,
                      python: Path | None = None, index_args: Sequence[str] = ()) -> Lock:
    """Upgrade `baseline` with uv in a copy of its project under `scratch`; the candidate Lock.

    `python` is the interpreter the lock is resolved for (default: the running one);
    `index_args` are uv's flags for where packages come from (`--no-index --find-links DIR`).
    """
    uv = uv_binary()
    if uv is None:
        raise MissingDependencyError("computing a candidate lock", "uv (pip install uv)")
    request = _checked(baseline, request)
    work = _scratch_copy(baseline.path.parent, scratch, keep=baseline.path.name)
    target = python or Path(sys.executable)
    if baseline.format == "uv.lock":
        argv = [str(uv), "lock", *request.flags(), "--python", str(target), *index_args]
    else:
        argv = [str(uv), "pip", "compile", _compile_input(baseline, request, work),
                "-o", baseline.path.name, "--python", str(target), *request.flags(),
                *_compile_options(baseline), *index_args]
    completed = run_tool(argv, cwd=work)
    if completed.returncode != 0:
        command = " ".join(["uv", *(argv[1:3] if baseline.format == "uv.lock" else argv[1:4])])
        raise tool_error(completed, f"the candidate lock does not resolve ({command})",
                         ErrorKind.LOCK_UNRESOLVABLE)
    return read_lock(work / baseline.path.name, role="candidate lock", fmt=baseline.format)


def _checked(baseline: Lock, request: UpgradeRequest) -> UpgradeRequest:
    """The request with names normalized; a name the lock does not pin is a ConfigError."""
    names = tuple(dict.fromkeys(canonical_name(name) for name in request.packages))
    unknown = [name for name in names if name not in baseline.packages]
    if unknown:
        raise ConfigError(f"--upgrade-package {unknown[0]}: {baseline.path.name} does not pin"
                          f" {unknown[0]}")
    return UpgradeRequest(names)


def _compile_input(baseline: Lock, request: UpgradeRequest, work: Path) -> str:
    """What `uv pip compile` reads: the lock's source, else the relaxed pins (written)."""
    source = requirements_source(baseline.path)
    if source is not None:
        return source.name
    lines = []
    for name, package in baseline.packages.items():
        if not package.applies:
            continue  # compiled for this interpreter: its markers would drop it anyway
        if request.everything:
            if package.direct:
                lines.append(name)
        elif name in request.packages:
            lines.append(name)
        else:
            lines.append(f"{name}=={package.version}")
    (work / RELAXED_INPUT).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return RELAXED_INPUT


def _compile_options(baseline: Lock) -> list[str]:
    """Keep the lock's shape, so that the upgrade's diff is the versions: hashes, annotations
    and header (with the baseline's own command in it, not our scratch paths) as it has them,
    and the extras of pyproject.toml when it pins packages only they ask for."""
    text = parsing.read_text(baseline.path)
    options = ["--generate-hashes"] if baseline.hash_pinned else []
    if not requirements_via(text):
        options.append("--no-annotate")
    command = _header_command(text)
    options += ["--custom-compile-command", command] if command else ["--no-header"]
    source = requirements_source(baseline.path)
    if (source is not None and source.name == "pyproject.toml"
            and optional_names(source) & set(baseline.packages)):
        options.append("--all-extras")
    return options


def _header_command(text: str) -> str | None:
    """The command in a `uv pip compile` / pip-compile header, or None without a header."""
    lines = [*text.splitlines()[:6], ""]
    for number, line in enumerate(lines[:-1]):
        if "autogenerated by" in line and "following command" in line:
            return lines[number + 1].lstrip("#").strip() or None
    return None


def _scratch_copy(project: Path, scratch: Path, keep: str) -> Path:
    """A copy of `project` in a new directory under `scratch` (never scratch itself); the file
    `keep` (the lock) is copied whatever its size."""
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="candidate-", dir=scratch)) / (project.name or "project")
    keep_out = scratch.resolve()

    def ignore(directory: str, names: list[str]) -> list[str]:
        skipped = []
        for name in names:
            path = Path(directory, name)
            resolved = path.resolve()
            if (name in NOT_COPIED or resolved == keep_out or resolved in keep_out.parents
                    or (name != keep and path.is_file() and not path.is_symlink()
                        and path.stat().st_size > MAX_COPIED_BYTES)):
                skipped.append(name)
        return skipped

    shutil.copytree(project, work, symlinks=True, ignore=ignore)
    return work
