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
environments, caches, the gate's output; files over MAX_COPIED_BYTES (data, checkpoints, a
find-links folder's wheels) are linked, not copied.
"""

from __future__ import annotations

import dataclasses
import os
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

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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


def given_candidate(path: Path, baseline: Lock, project: Path | None = None) -> Lock:
    """A candidate lock from a file (`--candidate-lock`), in the baseline's format unless its
    name says otherwise; its relative paths start at `project` (default: its directory)."""
    return _with_sources(read_lock(path, role="candidate lock", fmt=baseline.format,
                                   project=project), baseline)


def compute_candidate(baseline: Lock, request: UpgradeRequest, scratch: Path, *,
                      python: Path | None = None, index_args: Sequence[str] = (),
                      project: Path | None = None) -> Lock:
    """Upgrade `baseline` with uv in a copy of its project under `scratch`; the candidate Lock.

    `python` is the interpreter the lock is resolved for (default: the running one);
    `index_args` are uv's flags for where packages come from (`--no-index --find-links DIR`),
    after a requirements lock's own index options; `project` is where the lock's relative
    paths start (default: the baseline's directory).
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
                *_compile_options(baseline), *_index_flags(baseline), *index_args]
    completed = run_tool(argv, cwd=work)
    if completed.returncode != 0:
        command = " ".join(["uv", *(argv[1:3] if baseline.format == "uv.lock" else argv[1:4])])
        raise tool_error(completed, f"the candidate lock does not resolve ({command})",
                         ErrorKind.LOCK_UNRESOLVABLE)
    candidate = read_lock(work / baseline.path.name, role="candidate lock", fmt=baseline.format,
                          project=project or baseline.path.parent)
    return _with_sources(candidate, baseline)


def _with_sources(candidate: Lock, baseline: Lock) -> Lock:
    """A requirements candidate without index options of its own takes the baseline's: the
    same project, and `uv pip compile` does not write them into the file it compiles."""
    if candidate.format != "requirements":
        return candidate
    return dataclasses.replace(candidate,
                               sources=candidate.sources.with_options_of(baseline.sources))


def _index_flags(baseline: Lock) -> list[str]:
    """A requirements lock's index options as uv's flags, so that the candidate is resolved
    where the baseline's packages come from (a compile source may not repeat them)."""
    flags: list[str] = []
    for line in baseline.sources.index_options():
        option, _, value = line.partition(" ")
        if option in _COMPILE_FLAGS:
            flags += [_COMPILE_FLAGS[option], *([value] if value else [])]
    return flags


# Requirements-file options and the `uv pip compile` flags that mean the same.
_COMPILE_FLAGS = {"--index-url": "--index-url", "--extra-index-url": "--extra-index-url",
                  "--find-links": "--find-links", "--no-index": "--no-index",
                  "--trusted-host": "--allow-insecure-host", "--pre": "--prerelease=allow"}


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
        origin = baseline.sources.pinned.get((name, package.version))
        if not package.applies:
            continue  # compiled for this interpreter: its markers would drop it anyway
        if origin is not None and " @ " in origin.requirement:
            lines.append(origin.requirement)  # a direct reference names its artifact: kept
        elif request.everything:
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
    """A copy of `project` in a new directory under `scratch` (never scratch itself). Large
    files (a find-links folder's torch wheels) are linked, not copied; so are the folders that
    the project's `[tool.uv]` names outside it (`find-links = ["../wheels"]`), at the same
    relative place, so that uv finds them from the copy as from the project."""
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="candidate-", dir=scratch)) / (project.name or "project")
    keep_out = scratch.resolve()

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [name for name in names if name in NOT_COPIED
                or (resolved := Path(directory, name).resolve()) == keep_out
                or resolved in keep_out.parents]

    def copy(source: str, target: str) -> None:
        if Path(source).name != keep and Path(source).stat().st_size > MAX_COPIED_BYTES:
            os.symlink(Path(source).resolve(), target)
        else:
            shutil.copy2(source, target)

    shutil.copytree(project, work, symlinks=True, ignore=ignore, copy_function=copy)
    _link_outside(project, work)
    return work


def _link_outside(project: Path, work: Path) -> None:
    """Links in the copy's surroundings to the paths the project's uv configuration names
    outside the project, where they fall inside the copy's own scratch directory."""
    pyproject = project / "pyproject.toml"
    try:
        uv = tomllib.loads(parsing.read_text(pyproject)).get("tool", {}).get("uv", {})
    except (OSError, UnicodeDecodeError, parsing.OverBudget, tomllib.TOMLDecodeError):
        return
    named = [*uv.get("find-links", []), *(index.get("url", "") for index in uv.get("index", []))]
    for source in uv.get("sources", {}).values():
        for entry in source if isinstance(source, list) else [source]:
            named += [entry.get("path", ""), entry.get("editable", "")]
    for value in named:
        if not isinstance(value, str) or not value or "://" in value or Path(value).is_absolute():
            continue
        target = (project / value).resolve()
        if target == project.resolve() or project.resolve() in target.parents:
            continue  # inside the project: copied
        link = Path(os.path.normpath(work / value))
        if work.parent in link.parents and not link.exists() and target.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
