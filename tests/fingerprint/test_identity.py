"""The configuration's identity: what enters `config_hash` and what stays out of it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from repro_gate.fingerprint.identity import (
    canonical_json,
    config_hash,
    distributed_identity,
    identity,
    seeded_by_training,
)

GPU = {"name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "memory_mib": 81920,
       "mig_mode": "disabled", "ecc_mode": "enabled",
       "uuid": "GPU-11111111-2222-3333-4444-555555555555", "pci_bus_id": "00000000:07:00.0"}


def fingerprint() -> dict[str, Any]:
    return {
        "collected_at": "2030-01-01T00:00:00+00:00",
        "code": {"commit": "a" * 40, "ref": "refs/heads/main", "dirty": False,
                 "diff_sha256": None, "remote_url": "https://example.com/r.git"},
        "data": {"paths": [{"path": "data/", "sha256": "d" * 64, "bytes": 10, "files": 2,
                            "file_sha256": {"x": "e" * 64}}]},
        "env": {"image": {"reference": "trainer:1", "id": None, "repo_digests": []},
                "python": "3.11.7", "torch": "2.4.0", "kernel": "6.1.0",
                "packages": {"versions": {"numpy": "2.0.1"}, "sha256": "f" * 64},
                "lockfiles": [{"path": "uv.lock", "sha256": "1" * 64, "pins": {}}]},
        "random": {"seed": None, "torch_initial_seed": 123,
                   "flags": {"deterministic_algorithms": True, "cudnn_benchmark": False},
                   "threads": {"torch_num_threads": 8, "env": {"OMP_NUM_THREADS": "8"}},
                   "distributed": {"world_size": 1, "backend": None, "variables": {}}},
        "hardware": {"hostname": "runner-1", "cpu": {"model": "EPYC", "count": 64},
                     "driver_version": "550.54.15", "cuda_driver_version": 12040,
                     "gpus": [dict(GPU)]},
    }


def test_volatile_facts_stay_out_of_the_hash() -> None:
    base = fingerprint()
    moved = copy.deepcopy(base)
    moved["collected_at"] = "2031-05-05T00:00:00+00:00"
    moved["code"].update(ref="refs/heads/other", remote_url="https://example.com/fork.git")
    moved["env"]["kernel"] = "6.8.0"
    moved["random"]["torch_initial_seed"] = 99
    moved["random"]["pythonhashseed"] = "1"  # each run gets its own
    moved["hardware"]["hostname"] = "runner-2"
    moved["hardware"]["gpus"][0].update(uuid="GPU-0", pci_bus_id="00000000:AA:00.0")
    moved["data"]["paths"][0]["file_sha256"] = {}

    assert config_hash(moved) == config_hash(base)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("code", "commit", "b" * 40),
        ("env", "torch", "2.5.0"),
        ("hardware", "driver_version", "560.28.03"),
    ],
)
def test_a_reproducibility_relevant_fact_changes_the_hash(section: str, key: str,
                                                          value: str) -> None:
    changed = fingerprint()
    changed[section][key] = value

    assert config_hash(changed) != config_hash(fingerprint())


def test_the_order_of_identical_gpus_does_not_matter() -> None:
    other = dict(GPU, name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
    one, two = fingerprint(), fingerprint()
    one["hardware"]["gpus"] = [dict(GPU), other]
    two["hardware"]["gpus"] = [other, dict(GPU)]

    assert config_hash(one) == config_hash(two)
    assert "uuid" not in identity(one)["hardware"]["gpus"][0]


def test_an_image_reference_counts_only_when_nothing_better_identifies_the_image() -> None:
    tagged = fingerprint()
    digested = fingerprint()
    digested["env"]["image"] = {"reference": "trainer:1", "id": None,
                                "repo_digests": ["b.example/t@sha256:22", "a.example/t@sha256:11",
                                                 "c.example/t@sha256:11"]}

    assert identity(tagged)["env"]["image"] == {"id": None, "digests": [],
                                                "reference": "trainer:1"}
    assert identity(digested)["env"]["image"] == {"id": None,
                                                  "digests": ["sha256:11", "sha256:22"],
                                                  "reference": None}


def test_the_generators_the_training_seeds_are_named_once_in_order() -> None:
    calls = [{"generator": "torch", "line": 3}, {"generator": "numpy"},
             {"generator": "torch", "line": 9}, "not a call"]

    assert seeded_by_training({"training": calls}) == "numpy, torch"
    assert seeded_by_training({"training": []}) is None
    assert seeded_by_training(None) is None


def test_one_plain_process_adds_no_distributed_facts() -> None:
    assert distributed_identity({}) == {}
    assert distributed_identity({"world_size": 1, "backend": None, "variables": {}}) == {}
    assert distributed_identity({"world_size": 2, "backend": "nccl",
                                 "variables": {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO",
                                               "NCCL_SOCKET_IFNAME": "eth0"}}) == {
        "world_size": 2, "distributed_backend": "nccl",
        "distributed_env": {"NCCL_ALGO": "Ring"}}


def test_canonical_json_is_sorted_compact_and_refuses_nan() -> None:
    assert canonical_json({"b": 1, "a": ["é", 2.5]}) == '{"a":["é",2.5],"b":1}'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
