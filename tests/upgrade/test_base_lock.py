"""The base commit's lock read from a real git repository made in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.git_repo import git

from repro_gate.environments.dependency_lock import read_lock
from repro_gate.errors import ErrorKind, GateError
from repro_gate.upgrade.base_lock import FETCH_HINT, base_lock


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def repository(project: Path) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    git(project, "init", "-q", "-b", "main")
    return project


def upgrade_in_place(project: Path, name: str) -> None:
    """What a Dependabot pull request does to the lock: `numlib 1.0` becomes `1.1`."""
    lock = project / name
    text = lock.read_text().replace("numlib==1.0", "numlib==1.1")
    lock.write_text(text.replace('name = "numlib"\nversion = "1.0"',
                                 'name = "numlib"\nversion = "1.1"'))


def test_uv_lock_at_the_base_commit_with_its_pyproject(
    make_project: Callable[[str], Path], tmp_path: Path
) -> None:
    project = repository(make_project("uv-project"))
    base = commit_all(project, "base")
    upgrade_in_place(project, "uv.lock")
    (project / "pyproject.toml").write_text("changed on the branch\n")
    commit_all(project, "upgrade numlib")

    written = base_lock(project, Path("uv.lock"), base, tmp_path / "out" / "base")

    assert written == tmp_path / "out" / "base" / "uv.lock"
    assert written.read_bytes() == git_show(project, base, "uv.lock")
    assert read_lock(written).packages["numlib"].version == "1.0"
    assert read_lock(project / "uv.lock").packages["numlib"].version == "1.1"
    beside = written.parent / "pyproject.toml"
    assert beside.read_bytes() == git_show(project, base, "pyproject.toml")


def test_requirements_lock_in_a_subdirectory_with_its_source(
    make_project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = repository(tmp_path / "repo")
    project = root / "training"
    shutil.copytree(make_project("requirements-in"), project)
    base = commit_all(root, "base")
    upgrade_in_place(project, "requirements.txt")
    commit_all(root, "upgrade numlib")
    stale = tmp_path / "base"
    stale.mkdir()
    (stale / "pyproject.toml").write_text("left over from an earlier run\n")

    written = base_lock(project, project / "requirements.txt", base, stale)

    lock = read_lock(written)
    assert lock.packages["numlib"].version == "1.0"
    assert (stale / "requirements.in").read_text() == "numlib\nharmless\n"
    assert not (stale / "pyproject.toml").exists()  # the base has none: no stale copy is read
    assert lock.packages["numlib"].direct and not lock.packages["leaf"].direct


def test_a_base_commit_the_checkout_does_not_hold_says_how_to_fetch_it(
    make_project: Callable[[str], Path], tmp_path: Path
) -> None:
    origin = repository(make_project("uv-project"))
    base = commit_all(origin, "base")
    upgrade_in_place(origin, "uv.lock")
    commit_all(origin, "upgrade numlib")
    shallow = tmp_path / "shallow"  # what actions/checkout does by default: one commit
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))

    with pytest.raises(GateError) as raised:
        base_lock(shallow, Path("uv.lock"), base, tmp_path / "base")

    assert raised.value.kind == ErrorKind.LOCKFILE
    assert str(raised.value) == f"the base commit {base[:12]} is not in the checkout: {FETCH_HINT}"


def test_a_base_without_the_lock_and_a_directory_without_git(tmp_path: Path) -> None:
    project = repository(tmp_path / "repo")
    (project / "README.md").write_text("no lock yet\n")
    base = commit_all(project, "base")

    with pytest.raises(GateError) as no_lock:
        base_lock(project, Path("uv.lock"), base, tmp_path / "base")
    (tmp_path / "plain").mkdir()
    with pytest.raises(GateError) as no_git:
        base_lock(tmp_path / "plain", Path("uv.lock"), base, tmp_path / "base")
    with pytest.raises(GateError) as not_a_sha:
        base_lock(project, Path("uv.lock"), "--output=x", tmp_path / "base")

    assert str(no_lock.value) == f"the base commit {base[:12]} has no uv.lock"
    assert str(no_git.value).startswith(f"{tmp_path / 'plain'} is not a git checkout")
    assert str(not_a_sha.value) == "base commit '--output=x' is not a commit SHA"
    for error in (no_lock.value, no_git.value, not_a_sha.value):
        assert error.kind == ErrorKind.LOCKFILE and "\n" not in str(error)
    assert not (tmp_path / "base").exists()


def test_no_git_command_is_needed(
    make_project: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The action's image has no git: the lock is read from the checkout's objects."""
    project = repository(make_project("uv-project"))
    base = commit_all(project, "base")
    git(project, "gc", "-q")  # packed objects, as a clone has them
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    written = base_lock(project, Path("uv.lock"), base, tmp_path / "base")

    assert read_lock(written).packages["numlib"].version == "1.0"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the checkout as someone else")
def test_a_checkout_owned_by_another_user(
    make_project: Callable[[str], Path], tmp_path: Path
) -> None:
    """The action's container runs as root on a checkout the runner's user owns."""
    project = repository(make_project("uv-project"))
    base = commit_all(project, "base")
    for path in [project, *project.rglob("*")]:
        os.chown(path, 1001, 1001, follow_symlinks=False)

    written = base_lock(project, Path("uv.lock"), base, tmp_path / "base")

    assert read_lock(written).packages["numlib"].version == "1.0"


def git_show(repo: Path, sha: str, path: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", f"{sha}:{path}"], cwd=repo,
                          capture_output=True, check=True, timeout=60).stdout
