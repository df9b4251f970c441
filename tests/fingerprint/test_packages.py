"""Installed distributions against the versions the lockfiles pin."""

from __future__ import annotations

from typing import Any

from repro_gate.fingerprint.packages import lock_mismatches, same_version


def lockfile(path: str, pins: dict[str, list[str]], is_lock: bool = True) -> dict[str, Any]:
    return {"path": path, "pins": pins, "is_lock": is_lock}


def test_a_local_label_the_lock_leaves_out_is_ignored() -> None:
    assert same_version("2.4.0+cu121", "2.4.0")
    assert same_version("V1.26.4", "1.26.4 ")
    assert not same_version("2.4.0+cu121", "2.4.0+cpu")
    assert not same_version("2.4.1", "2.4.0")


def test_a_package_at_none_of_its_pinned_versions_is_a_mismatch() -> None:
    installed = {"numpy": "2.0.1", "torch": "2.4.0+cu121", "rich": "13.7.1"}
    locks = [lockfile("uv.lock", {"numpy": ["1.26.4"], "torch": ["2.4.0"],
                                  "rich": ["13.7.0", "13.7.1"], "absent": ["1.0"]})]

    assert lock_mismatches(installed, locks) == [
        {"name": "numpy", "installed": "2.0.1", "locked": ["1.26.4"], "lockfile": "uv.lock"}]


def test_files_that_are_not_locks_are_not_compared() -> None:
    loose = lockfile("requirements.txt", {"numpy": ["1.26.4"]}, is_lock=False)

    assert lock_mismatches({"numpy": "2.0.1"}, [loose]) == []


def test_each_lock_reports_its_own_mismatches() -> None:
    locks = [lockfile("a/uv.lock", {"numpy": ["1.0"]}), lockfile("b/uv.lock", {"numpy": ["2.0"]})]

    assert [m["lockfile"] for m in lock_mismatches({"numpy": "2.0"}, locks)] == ["a/uv.lock"]
