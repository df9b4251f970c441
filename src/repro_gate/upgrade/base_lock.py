"""The lock file as it was at a commit: the baseline of an upgrade check on a pull request.

A Dependabot or Renovate pull request changes the lock; the action checks the base branch's
lock (the baseline) against the pull request's (the candidate). The base lock is read from the
checkout's git objects (the bytes as committed, no filters) and written with the project files
uv and the lock reader look at beside it (`pyproject.toml`, `X.in` for `X.txt`), so direct and
transitive dependencies are told apart as in the workspace.

The objects are read with dulwich, not the git command: the action's image stays small (git
would add about 60 MB), and reading objects runs no hooks, filters or configuration of the
checkout, which the action's container (root) does not own.

Every problem is one line, a LOCKFILE GateError: not a checkout, a base commit the checkout
does not hold (actions/checkout fetches one commit by default), no such lock there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo

from repro_gate.errors import ErrorKind, GateError

FETCH_HINT = "fetch the base commit: actions/checkout with fetch-depth: 0"
_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")  # a full SHA-1 or SHA-256 object name


def base_lock(workdir: Path, lock_path: Path, base_sha: str, destination: Path) -> Path:
    """The lock at `base_sha`, written under `destination` with its sources; returns its path.

    `lock_path` is the workspace's lock (absolute, or relative to `workdir`).
    """
    if not _SHA.fullmatch(base_sha):
        raise _error(f"base commit {base_sha!r} is not a commit SHA")
    absolute = lock_path if lock_path.is_absolute() else workdir / lock_path
    with _repository(workdir) as repository:
        in_tree = _relative(Path(repository.path), absolute)  # tree paths start at the root
        commit = _commit(repository, base_sha)
        content = _blob(repository, commit, in_tree)
        if content is None:
            raise _error(f"the base commit {base_sha[:12]} has no {_relative(workdir, absolute)}")
        destination.mkdir(parents=True, exist_ok=True)
        target = destination / lock_path.name
        target.write_bytes(content)
        for source in _source_names(lock_path):
            _copy_beside(repository, commit, Path(in_tree).parent / source, destination)
    return target


def _source_names(lock_path: Path) -> tuple[str, ...]:
    """What the lock is read or compiled with: `X.in` for `X.txt`, and `pyproject.toml`."""
    names = ["pyproject.toml"]
    if lock_path.suffix == ".txt":
        names.insert(0, lock_path.with_suffix(".in").name)
    return tuple(names)


def _copy_beside(repository: Repo, commit: Commit, relative: Path, destination: Path) -> None:
    """The file at the base commit beside the lock; a stale copy goes when the base has none."""
    target = destination / relative.name
    content = _blob(repository, commit, relative.as_posix())
    if content is None:
        target.unlink(missing_ok=True)
    else:
        target.write_bytes(content)


def _relative(directory: Path, path: Path) -> str:
    """`path` relative to `directory`, with forward slashes (as git's trees name files)."""
    return Path(os.path.relpath(path.resolve(), directory.resolve())).as_posix()


def _repository(workdir: Path) -> Repo:
    """The checkout's repository (its `.git` found upwards from the workdir)."""
    try:
        return Repo.discover(str(workdir))
    except NotGitRepository:
        raise _error(f"{workdir} is not a git checkout, where the base commit's lock is"
                     " read") from None


def _commit(repository: Repo, sha: str) -> Commit:
    """The commit `sha`, or a LOCKFILE error saying how to fetch it."""
    try:
        found = repository[sha.lower().encode()]
    except KeyError:
        raise _error(f"the base commit {sha[:12]} is not in the checkout: {FETCH_HINT}") from None
    if not isinstance(found, Commit):
        raise _error(f"{sha[:12]} is not a commit")
    return found


def _blob(repository: Repo, commit: Commit, in_tree: str) -> bytes | None:
    """The bytes of the file `in_tree` (from the repository's root) at `commit`; None when
    the commit has no such file."""
    if in_tree.startswith("../"):
        return None  # outside the repository
    try:
        _, sha = tree_lookup_path(repository.object_store.__getitem__, commit.tree,
                                  in_tree.encode())
        blob = repository.object_store[sha]
    except KeyError:
        return None
    return blob.data if isinstance(blob, Blob) else None


def _error(message: str) -> GateError:
    return GateError(message, kind=ErrorKind.LOCKFILE)
