"""Host facts, the runs' in-process fingerprints and the image merged into one fingerprint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.config import Config, ContainerConfig
from repro_gate.fingerprint.assemble import (
    build_fingerprint,
    describe_image,
    deterministic_runs,
    pick_source,
    run_mismatches,
)

CONFIG = Config(workdir=Path("/w"), output_dir=Path("/w/out"))


def runtime(threads: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "python": {"version": "3.11.7", "implementation": "CPython"},
        "platform": {"os": "Linux", "kernel": "6.1.0", "libc": "glibc 2.36",
                     "machine": "x86_64"},
        "torch": {"version": "2.4.0", "cuda": None},
        "packages": {"versions": {"numpy": "2.0.1", "torch": "2.4.0"}, "sha256": "0" * 64},
        "flags": {"deterministic_algorithms": True},
        "threads": {"torch_num_threads": threads},
        "random": {"torch_initial_seed": threads, "pythonhashseed": "0"},
        **extra,
    }


def test_the_default_mode_run_and_missing_fingerprints_do_not_describe_the_environment() -> None:
    a, b, default = runtime(), runtime(), runtime()
    runs = {"default": default, "B": b, "A": a, "C": None}

    assert list(deterministic_runs(runs)) == ["A", "B"]
    assert pick_source(runs) == ("A", a)
    assert pick_source({"default": default, "A": None}) == ("default", default)
    assert pick_source({"A": None}) == (None, None)


def test_the_image_is_known_unknown_or_absent_with_the_reason() -> None:
    inspected = describe_image("t:1", {"reference": "t:1", "id": "sha256:" + "a" * 64,
                                       "repo_digests": ["t@sha256:2", "t@sha256:1"]})
    built_here = describe_image("t:1", {"id": "sha256:" + "b" * 64, "repo_digests": []})

    assert inspected == {"status": "known", "reference": "t:1", "id": "sha256:" + "a" * 64,
                         "repo_digests": ["t@sha256:1", "t@sha256:2"]}
    assert built_here["reference"] == "t:1"
    assert built_here["digests_reason"].startswith("no RepoDigests")
    assert describe_image("t:1", {"id": ""})["reason"] == (
        "the launcher could not inspect the image")
    assert describe_image("t:1", None)["reason"] == (
        "the image was not inspected (no container run yet)")
    assert describe_image(None, None)["status"] == "none"


def test_facts_that_differ_between_deterministic_runs_are_listed_volatile_ones_not() -> None:
    runs = {"A": runtime(threads=4, errors=["x"]), "B": runtime(threads=8, errors=[])}
    runs["B"]["random"]["pythonhashseed"] = "1"  # each run gets its own hash seed

    assert run_mismatches(runs) == [
        {"field": "threads.torch_num_threads", "values": {"A": 4, "B": 8}}]
    assert run_mismatches({"A": runtime()}) == []


def test_the_fingerprint_takes_its_environment_from_the_first_deterministic_run() -> None:
    loader = {"file": "train.py", "line": 12, "num_workers": 2, "generator": False}
    host = {"collected_at": "2030-01-01T00:00:00+00:00", "hostname": "runner",
            "code": {"commit": "c" * 40}, "cpu": {"model": "EPYC", "count": 8},
            "lockfiles": [{"path": "uv.lock", "sha256": "1" * 64, "is_lock": True,
                           "pins": {"numpy": ["1.26.4"]}}],
            "gpus": {"devices": [], "reason": "NVML is not installed"}}
    in_process = {"A": runtime(dataloaders=[loader], errors=["probe: late"]),
                  "B": runtime(dataloaders=[loader]),
                  "default": runtime(dataloaders=[dict(loader, line=99)])}

    fingerprint = build_fingerprint(CONFIG, host, in_process, None)

    assert fingerprint["env"]["torch"] == "2.4.0" and fingerprint["env"]["os"] == "Linux"
    assert fingerprint["env"]["image"]["status"] == "none"
    assert fingerprint["env"]["lock_mismatches"] == [
        {"name": "numpy", "installed": "2.0.1", "locked": ["1.26.4"], "lockfile": "uv.lock"}]
    assert fingerprint["hardware"]["gpu_reason"] == (
        "NVML: NVML is not installed; torch: no CUDA device")
    summary = fingerprint["in_process"]
    assert summary["source"] == "A"
    assert summary["runs"] == {"A": "recorded", "B": "recorded", "default": "recorded"}
    assert summary["dataloaders"] == [loader]  # once, and not the default-mode run's
    assert summary["errors"] == ["A: probe: late"]


def test_without_any_in_process_fingerprint_the_reason_is_recorded() -> None:
    config = Config(workdir=Path("/w"), output_dir=Path("/w/out"),
                    container=ContainerConfig(image="t:1"))

    fingerprint = build_fingerprint(config, {}, {"A": None}, None)

    assert fingerprint["env"]["reason"] == "no in-process fingerprint: the probe wrote none"
    assert fingerprint["env"]["image"]["status"] == "unknown"
    assert fingerprint["random"]["distributed"]["world_size"] == 1
    assert fingerprint["in_process"]["runs"] == {"A": "missing"}
    assert fingerprint["data"] == {"paths": [], "bytes": 0, "files": 0}
