"""What changed between two environments, by category, in one line each."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from repro_gate.fingerprint.environment_diff import diff_lines, environment_diff, fingerprint_of
from repro_gate.fingerprint.identity import config_hash

GPU = {"name": "NVIDIA A100", "compute_capability": "8.0", "memory_mib": 81920,
       "mig_mode": "disabled", "ecc_mode": "enabled"}


def fingerprint() -> dict[str, Any]:
    return {
        "code": {"commit": "a" * 40, "dirty": False, "diff_sha256": None},
        "data": {"paths": [{"path": "data/", "sha256": "1" * 64, "bytes": 10, "files": 2,
                            "file_sha256": {"a.bin": "x", "b.bin": "y"}}]},
        "env": {"image": {"reference": None, "id": None, "repo_digests": []},
                "python": "3.11.7", "torch": "2.3.1",
                "packages": {"versions": {"numpy": "1.26.4", "torch": "2.3.1"}},
                "lockfiles": [{"path": "uv.lock", "sha256": "2" * 64,
                               "pins": {"numpy": ["1.26.4"]}}]},
        "random": {"seed": None, "flags": {"cudnn_benchmark": False},
                   "threads": {"env": {"MKL_NUM_THREADS": "1"}}},
        "hardware": {"cpu": {"model": "EPYC", "count": 8}, "driver_version": "550.54.15",
                     "gpus": [dict(GPU)]},
    }


def lines(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return diff_lines(environment_diff(old, new))


def test_identical_environments_are_equal_with_one_hash() -> None:
    result = environment_diff({"fingerprint": fingerprint()}, fingerprint())

    assert result["equal"] is True and result["changes"] == []
    assert result["old_config_hash"] == result["new_config_hash"] == config_hash(fingerprint())
    assert result["counts"] == {"code": 0, "data": 0, "env": 0, "random": 0, "hardware": 0}


def test_each_change_is_one_line_old_to_new() -> None:
    new = fingerprint()
    new["code"].update(commit="b" * 40, dirty=True, diff_sha256="d" * 64)
    new["env"]["torch"] = "2.4.0"
    new["random"]["seed"] = 7
    new["random"]["flags"]["cudnn_benchmark"] = True
    new["random"]["threads"]["env"]["OMP_NUM_THREADS"] = "4"
    new["hardware"]["driver_version"] = "560.28.03"

    result = environment_diff(fingerprint(), new)

    assert diff_lines(result) == [
        f"code: commit {'a' * 12} -> {'b' * 12}",
        "code: uncommitted changes differ",
        "code: working tree clean -> dirty",
        "env: torch 2.3.1 -> 2.4.0",
        "random: cuDNN benchmark off -> on",
        "random: seed supplied by the gate unset -> 7",
        "random: OMP_NUM_THREADS unset -> 4",
        "hardware: driver 550.54.15 -> 560.28.03",
    ]
    assert result["counts"] == {"code": 3, "data": 0, "env": 1, "random": 3, "hardware": 1}
    assert result["old_config_hash"] != result["new_config_hash"]


def test_data_changes_name_the_files() -> None:
    new = fingerprint()
    new["data"]["paths"][0].update(sha256="9" * 64, files=2,
                                   file_sha256={"a.bin": "changed", "c.bin": "z"})
    new["data"]["paths"].append({"path": "extra.csv", "sha256": "3" * 64, "bytes": 1,
                                 "files": 1})

    assert lines(fingerprint(), new) == [
        "data: data/ 1 file changed (a.bin), 1 file added (c.bin), 1 file removed (b.bin)",
        "data: extra.csv added",
    ]
    unhashed = fingerprint()
    unhashed["data"]["paths"][0]["sha256"] = None
    assert lines(fingerprint(), unhashed) == ["data: data/ not hashed on one side"]


def test_package_and_lockfile_changes_are_summed_up_with_at_most_five_names() -> None:
    old, new = fingerprint(), fingerprint()
    old["env"]["packages"]["versions"].update({f"p{i}": "1" for i in range(6)})
    new["env"]["packages"]["versions"].update({f"p{i}": "2" for i in range(6)}, rich="13.7.1")
    new["env"]["lockfiles"][0].update(sha256="4" * 64, pins={"numpy": ["2.0.1"]})

    assert lines(old, new) == [
        "env: installed packages: 6 packages changed (p0 1 -> 2, p1 1 -> 2, p2 1 -> 2,"
        " p3 1 -> 2, p4 1 -> 2, ...), 1 package added (rich 13.7.1)",
        "env: lockfile uv.lock: 1 package changed (numpy 1.26.4 -> 2.0.1)",
    ]


def test_gpus_are_summed_up_by_model() -> None:
    new = fingerprint()
    new["hardware"]["gpus"] = [dict(GPU, mig_mode="enabled"), dict(GPU, mig_mode="enabled")]

    assert lines(fingerprint(), new) == [
        "hardware: GPUs 1x NVIDIA A100 (sm 8.0, 81920 MiB, ECC enabled) ->"
        " 2x NVIDIA A100 (sm 8.0, 81920 MiB, MIG enabled, ECC enabled)"]
    assert lines(new, {**new, "hardware": {"gpus": []}})[-1].endswith("-> none")


def test_a_manifest_a_fingerprint_document_or_a_bare_fingerprint_is_read() -> None:
    bare = fingerprint()

    assert fingerprint_of({"schema_version": 5, "fingerprint": bare}) is bare
    assert fingerprint_of(bare) is bare


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (["a", "list"], "not a JSON object"),
        ({"fingerprint": "text"}, "its 'fingerprint' is not an object"),
        ({"schema_version": 1, "verdict": "pass"},
         "manifest (schema_version 1) has no fingerprint"),
        ({"code": {}}, "neither a repro-gate manifest nor a fingerprint"),
    ],
)
def test_other_documents_are_refused_saying_why(document: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        fingerprint_of(copy.deepcopy(document))


def test_a_variable_set_where_none_was_is_one_line() -> None:
    old = fingerprint()
    old["random"]["threads"]["env"] = {}
    new = fingerprint()
    new["random"]["threads"]["env"] = {"OMP_NUM_THREADS": "4"}

    assert lines(old, new) == ["random: OMP_NUM_THREADS unset -> 4"]
