"""The change set between two locks, and the pins of a baseline with some changes applied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.upgrade_index import PackageIndex

from repro_gate.environments import read_lock
from repro_gate.upgrade import Change, UpgradeRequest, apply_changes, change_set, compute_candidate


def write_lock(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_change_set_of_an_upgrade_of_everything(
    make_project: Callable[[str], Path], package_index: PackageIndex, tmp_path: Path,
) -> None:
    baseline = read_lock(make_project("uv-project") / "uv.lock")
    candidate = compute_candidate(baseline, UpgradeRequest(), tmp_path / "scratch",
                                  index_args=package_index.args)

    assert change_set(baseline, candidate) == [
        Change("harmless", "1.0", "1.1", "upgraded", direct=True),
        Change("leaf", "1.0", "1.1", "upgraded", direct=False),
        Change("numlib", "1.0", "1.1", "upgraded", direct=True),
    ]  # winonly did not move; it would be listed with applies=False if it had


def test_every_kind_of_change_sorted_by_name_versions_by_pep_440(tmp_path: Path) -> None:
    old = read_lock(write_lock(tmp_path / "old" / "requirements.txt",
                               "alpha==2.0\nbeta==1.0\ngamma==1.9\ndelta==1.0\nomega==1.0\n"))
    new = read_lock(write_lock(tmp_path / "new" / "requirements.txt",
                               "alpha==1.10\nbeta==1.0.0\ngamma==1.10\nepsilon==0.1\n"
                               'omega==2.0 ; sys_platform == "win32"\n'))

    assert change_set(old, new) == [
        Change("alpha", "2.0", "1.10", "downgraded", direct=True),
        # beta: 1.0 and 1.0.0 are the same version
        Change("delta", "1.0", None, "removed", direct=True),
        Change("epsilon", None, "0.1", "added", direct=True),
        Change("gamma", "1.9", "1.10", "upgraded", direct=True),  # not string order
        Change("omega", "1.0", "2.0", "upgraded", direct=True),
    ]


def test_a_change_only_other_platforms_install_does_not_apply(tmp_path: Path) -> None:
    old = read_lock(write_lock(tmp_path / "old" / "requirements.txt",
                               'winonly==1.0 ; sys_platform == "win32"\nnumlib==1.0\n'))
    new = read_lock(write_lock(tmp_path / "new" / "requirements.txt",
                               'winonly==1.1 ; sys_platform == "win32"\nnumlib==1.0\n'))

    assert change_set(old, new) == [
        Change("winonly", "1.0", "1.1", "upgraded", direct=True, applies=False)]


def test_apply_changes_moves_exactly_the_named_packages(tmp_path: Path) -> None:
    old = read_lock(write_lock(tmp_path / "old" / "requirements.txt",
                               "numlib==1.0\nharmless==1.0\nleaf==1.0\ngone==1.0\n"))
    new = read_lock(write_lock(tmp_path / "new" / "requirements.txt",
                               "numlib==1.1\nharmless==1.1\nleaf==1.1\nfresh==0.1\n"
                               'winonly==1.0 ; sys_platform == "win32"\n'))

    assert apply_changes(old, new, ["harmless"]) == {
        "gone": "1.0", "harmless": "1.1", "leaf": "1.0", "numlib": "1.0"}
    assert apply_changes(old, new, ["gone", "fresh", "winonly"]) == {
        "fresh": "0.1", "harmless": "1.0", "leaf": "1.0", "numlib": "1.0"}
    all_names = [change.name for change in change_set(old, new)]
    assert apply_changes(old, new, all_names) == new.pins()
    assert apply_changes(old, new, []) == old.pins()
