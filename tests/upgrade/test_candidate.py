"""Candidate locks computed by real uv in a scratch copy, for both formats; given candidates."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.upgrade_index import PackageIndex, tree_digest

from repro_gate.environments import Lock, read_lock
from repro_gate.errors import ErrorKind, GateError
from repro_gate.upgrade import UpgradeRequest, compute_candidate, given_candidate
from repro_gate.upgrade.candidate import RELAXED_INPUT

EVERYTHING = {"harmless": "1.1", "leaf": "1.1", "numlib": "1.1"}
REQUIREMENTS_PROJECTS = ["requirements-in", "requirements-pyproject", "requirements-bare"]


def candidate_of(project: Path, lock_name: str, request: UpgradeRequest, index: PackageIndex,
                 scratch: Path) -> tuple[Lock, Lock]:
    """(baseline, candidate), checking on the way that the user's files were only read."""
    before = tree_digest(project, leave_out=scratch)
    baseline = read_lock(project / lock_name)
    candidate = compute_candidate(baseline, request, scratch, index_args=index.args)
    assert tree_digest(project, leave_out=scratch) == before
    assert scratch in candidate.path.parents
    return baseline, candidate


@pytest.mark.parametrize(("request_", "expected"), [
    (UpgradeRequest(), EVERYTHING),
    (UpgradeRequest(("numlib",)), {"harmless": "1.0", "leaf": "1.0", "numlib": "1.1"}),
    (UpgradeRequest(("Leaf",)), {"harmless": "1.0", "leaf": "1.1", "numlib": "1.0"}),
])
def test_uv_lock_candidates(make_project: Callable[[str], Path], package_index: PackageIndex,
                            tmp_path: Path, request_: UpgradeRequest,
                            expected: dict[str, str]) -> None:
    project = make_project("uv-project")

    baseline, candidate = candidate_of(project, "uv.lock", request_, package_index,
                                       tmp_path / "scratch")

    assert candidate.format == "uv.lock" and candidate.path.name == "uv.lock"
    assert candidate.pins() == expected
    assert candidate.packages["winonly"].applies is False  # still locked, for Windows
    assert candidate.sha256 != baseline.sha256


@pytest.mark.parametrize("name", REQUIREMENTS_PROJECTS)
def test_requirements_candidates_for_everything(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
    name: str,
) -> None:
    project = make_project(name)

    baseline, candidate = candidate_of(project, "requirements.txt", UpgradeRequest(),
                                       package_index, tmp_path / "scratch")

    assert candidate.pins() == EVERYTHING
    assert candidate.hash_pinned is baseline.hash_pinned  # --generate-hashes when it had them
    direct = {n for n, p in candidate.packages.items() if p.direct}
    # bare pins: the direct ones (all of them, nothing says otherwise) were relaxed
    assert direct == ({"harmless", "leaf", "numlib"} if name == "requirements-bare"
                      else {"harmless", "numlib"})


@pytest.mark.parametrize("name", REQUIREMENTS_PROJECTS)
def test_requirements_candidates_for_one_package(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
    name: str,
) -> None:
    project = make_project(name)

    _, candidate = candidate_of(project, "requirements.txt", UpgradeRequest(("numlib",)),
                                package_index, tmp_path / "scratch")

    assert candidate.pins() == {"harmless": "1.0", "leaf": "1.0", "numlib": "1.1"}
    relaxed = candidate.path.parent / RELAXED_INPUT
    if name == "requirements-bare":  # no source: the pins, numlib's relaxed
        assert relaxed.read_text() == "harmless==1.0\nleaf==1.0\nnumlib\n"
    else:
        assert not relaxed.exists()


def test_the_scratch_copy_leaves_out_what_resolving_never_reads_and_links_large_files(
    make_project: Callable[[str], Path], package_index: PackageIndex,
) -> None:
    project = make_project("uv-project")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "data.bin").write_bytes(b"\0" * (16 * 1024 * 1024 + 1))
    (project / "train.py").write_text("print('training')\n")
    scratch = project / "repro-gate-out" / "upgrade"  # inside the project, as the gate's output

    _, candidate = candidate_of(project, "uv.lock", UpgradeRequest(), package_index, scratch)

    copied = {path.name for path in candidate.path.parent.iterdir()}
    assert copied == {"pyproject.toml", "uv.lock", "train.py", "data.bin"}
    large = candidate.path.parent / "data.bin"  # linked, not copied: a wheel uv may need
    assert large.is_symlink() and large.resolve() == (project / "data.bin").resolve()


def test_a_given_candidate_is_read_in_the_baselines_format(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
) -> None:
    baseline, computed = candidate_of(make_project("uv-project"), "uv.lock", UpgradeRequest(),
                                      package_index, tmp_path / "scratch")
    pull_request_lock = tmp_path / "pr" / "uv.lock.new"
    pull_request_lock.parent.mkdir()
    shutil.copy(computed.path, pull_request_lock)

    given = given_candidate(pull_request_lock, baseline)

    assert (given.format, given.pins(), given.sha256) == ("uv.lock", EVERYTHING, computed.sha256)
    with pytest.raises(GateError, match=r"^candidate lock .*missing\.lock not found$") as raised:
        given_candidate(tmp_path / "missing.lock", baseline)
    assert raised.value.kind is ErrorKind.LOCKFILE


def test_a_candidate_that_does_not_resolve_is_uvs_last_error_line(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
) -> None:
    project = make_project("uv-project")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("numlib>=1.0", "numlib>=2.0"))
    baseline = read_lock(project / "uv.lock")

    with pytest.raises(GateError) as raised:
        compute_candidate(baseline, UpgradeRequest(), tmp_path / "scratch",
                          index_args=package_index.args)

    assert raised.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert str(raised.value) == (
        "the candidate lock does not resolve (uv lock --upgrade): Because only numlib<=1.1 is"
        " available and your project depends on numlib>=2.0, we can conclude that your"
        " project's requirements are unsatisfiable."
    )


def test_a_requirements_candidate_that_does_not_resolve(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
) -> None:
    project = make_project("requirements-in")
    (project / "requirements.in").write_text("numlib>=3\nharmless\n")
    baseline = read_lock(project / "requirements.txt")

    with pytest.raises(GateError) as raised:
        compute_candidate(baseline, UpgradeRequest(("harmless",)), tmp_path / "scratch",
                          index_args=package_index.args)

    assert raised.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert str(raised.value).startswith(
        "the candidate lock does not resolve (uv pip compile requirements.in): Because only"
        " numlib<=1.1 is available and you require numlib>=3")


def test_upgrading_a_package_the_lock_does_not_pin_is_a_config_error(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
) -> None:
    baseline = read_lock(make_project("uv-project") / "uv.lock")

    with pytest.raises(GateError) as raised:
        compute_candidate(baseline, UpgradeRequest(("numlbi",)), tmp_path / "scratch",
                          index_args=package_index.args)

    assert raised.value.kind is ErrorKind.CONFIG
    assert str(raised.value) == "--upgrade-package numlbi: uv.lock does not pin numlbi"
    assert not (tmp_path / "scratch").exists()  # refused before any copy
