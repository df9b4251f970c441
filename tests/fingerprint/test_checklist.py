"""The reproducibility checklist: each practice's pass / warn / fail / deferred, and its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.config import Config, ContainerConfig
from repro_gate.fingerprint import checklist

CONFIG = Config(workdir=Path("/w"), output_dir=Path("/w/out"))
ORDER = ["image_pinned", "lockfile", "packages_match_lock", "clean_tree", "data", "seeds",
         "deterministic_algorithms", "cudnn_benchmark", "cublas_workspace",
         "dataloader_workers", "tf32", "gpus_same_model"]


def flags(**values: Any) -> dict[str, Any]:
    base = {"deterministic_algorithms": True, "warn_only": True, "cudnn_benchmark": False,
            "cublas_workspace_config": ":4096:8", "float32_matmul_precision": "highest",
            "cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": True}
    return {"flags": {**base, **values}}


def test_the_items_come_in_a_fixed_order_and_are_counted() -> None:
    result = checklist.evaluate({}, CONFIG, {"A": flags(), "B": flags()})

    assert [item["id"] for item in result["items"]] == ORDER
    assert sum(result["counts"].values()) == len(ORDER)
    assert result["counts"]["deferred"] == 0


def test_doctor_defers_what_only_a_run_can_tell() -> None:
    config = Config(workdir=Path("/w"), output_dir=Path("/w/out"),
                    container=ContainerConfig(image="t@sha256:" + "0" * 64))

    result = checklist.evaluate({}, config, None, static=True)

    deferred = [item["id"] for item in result["items"] if item["status"] == "deferred"]
    assert deferred == ["packages_match_lock", "seeds", "deterministic_algorithms",
                        "cudnn_benchmark", "cublas_workspace", "dataloader_workers", "tf32"]


def test_an_image_is_pinned_by_digest_and_a_tag_gets_its_digest_as_the_fix() -> None:
    local = checklist.image_pinned({})
    pinned = checklist.image_pinned({"reference": "t@sha256:" + "a" * 64})
    tagged = checklist.image_pinned({"reference": "t:1", "repo_digests": ["t@sha256:bb"]})

    assert (local.status, pinned.status, tagged.status) == ("warn", "pass", "fail")
    assert tagged.fix == "pin it by digest: `image: t@sha256:bb`"


def test_a_lock_passes_only_with_artifact_hashes() -> None:
    hashed = {"path": "uv.lock", "format": "uv.lock", "is_lock": True, "hash_pinned": True}
    unhashed = dict(hashed, hash_pinned=False)
    loose = {"path": "requirements.txt", "format": "requirements", "is_lock": False,
             "unpinned": ["numpy", "torch"]}
    conda = {"path": "environment.yml", "format": "environment.yml", "is_lock": False}

    assert checklist.lockfile_present([hashed]).status == "pass"
    assert checklist.lockfile_present([unhashed]).status == "warn"
    assert checklist.lockfile_present([loose]).detail == (
        "requirements.txt does not pin every requirement (numpy, torch)")
    assert checklist.lockfile_present([conda]).fix == (
        "lock it: `conda-lock -f environment.yml` or `pixi lock`")
    assert checklist.lockfile_present([]).detail == "no lockfile found"


def test_installed_packages_that_differ_from_the_lock_fail_naming_three() -> None:
    lock = {"path": "uv.lock", "is_lock": True, "pins": {"a": ["1"], "b": ["1"]}}
    mismatches = [{"name": name, "installed": "2", "locked": ["1"], "lockfile": "uv.lock"}
                  for name in "abcd"]
    env = {"lockfiles": [lock], "packages": {"versions": {}}, "lock_mismatches": mismatches}

    item = checklist.packages_match_lock(env, static=False, in_image=False)
    fine = checklist.packages_match_lock(dict(env, lock_mismatches=[]), static=False,
                                         in_image=False)

    assert item.status == "fail"
    assert item.detail == ("4 installed differ from the lock: a 2 (locked 1 in uv.lock),"
                           " b 2 (locked 1 in uv.lock), c 2 (locked 1 in uv.lock) and 1 more")
    assert fine.detail == (
        "2 pins checked against the packages installed in the training's interpreter")


def test_the_tree_and_the_data_items_read_the_code_and_data_sections() -> None:
    assert checklist.clean_tree({"commit": None, "reason": "not a git repository"}).detail == (
        "code is not identified: not a git repository")
    dirty = checklist.clean_tree({"commit": "0123456789abcdef", "dirty": True,
                                  "untracked_files": 2})
    assert dirty.detail == "uncommitted changes on 0123456789ab, 2 untracked files"
    missing = checklist.data_checksummed({"paths": [{"path": "x/", "error": "does not exist"}]})
    assert (missing.status, missing.detail) == ("fail", "x/ does not exist")
    assert checklist.data_checksummed({"paths": []}).status == "warn"


def test_flags_that_break_determinism_fail_in_the_run_that_has_them() -> None:
    runs = {"A": flags(), "B": flags(cudnn_benchmark=True, deterministic_algorithms=False)}

    assert checklist.deterministic_algorithms(runs, static=False).detail == (
        "off at the end of run B")
    assert checklist.cudnn_benchmark_off(runs, static=False).detail == (
        "torch.backends.cudnn.benchmark is True in run B")
    no_torch = checklist.cudnn_benchmark_off({"A": {"flags": {}}}, static=False)
    assert no_torch.status == "warn" and "torch was not imported" in no_torch.detail


def test_a_bad_cublas_workspace_fails_on_gpus_and_warns_without() -> None:
    runs = {"A": flags(cublas_workspace_config=None)}
    configured = Config(workdir=Path("/w"), output_dir=Path("/w/out"),
                        env={"CUBLAS_WORKSPACE_CONFIG": ":0:0"})

    on_cpu = checklist.cublas_workspace(CONFIG, runs, {}, static=False)
    on_gpu = checklist.cublas_workspace(CONFIG, runs, {"hardware": {"gpus": [{}]}},
                                        static=False)

    assert (on_cpu.status, on_cpu.detail) == (
        "warn", "CUBLAS_WORKSPACE_CONFIG A: unset (matters on GPUs)")
    assert on_gpu.status == "fail"
    assert checklist.cublas_workspace(configured, runs, {}, static=True).detail == (
        "`env` sets CUBLAS_WORKSPACE_CONFIG=:0:0")


def test_dataloader_workers_need_a_generator_or_a_worker_init_fn() -> None:
    loaders = [{"file": "train.py", "line": 9, "num_workers": 2, "generator": False},
               {"file": "eval.py", "line": 3, "num_workers": 2, "worker_init_fn": True}]
    fingerprint = {"in_process": {"dataloaders": loaders}}

    item = checklist.dataloader_workers_seeded(fingerprint, {"A": flags()}, static=False)
    seeded = checklist.dataloader_workers_seeded({"in_process": {"dataloaders": loaders[1:]}},
                                                 {"A": flags()}, static=False)

    assert item.status == "fail" and item.detail.endswith("at train.py:9")
    assert seeded.detail == "1 DataLoaders with workers, all seeded"


def test_mixed_gpu_models_fail() -> None:
    mixed = checklist.gpus_same_model({"gpus": [{"name": "A100"}, {"name": "H100"}]})
    same = checklist.gpus_same_model({"gpus": [{"name": "A100"}, {"name": "A100"}]})

    assert mixed.status == "fail"
    assert mixed.detail == "mixed GPUs: A100 (no MIG info), H100 (no MIG info)"
    assert same.detail == "2x A100"


def test_failures_that_agreeing_runs_contradict_become_risks_with_their_fix() -> None:
    loaders = [{"file": "train.py", "line": 9, "num_workers": 2}]
    fingerprint = {"in_process": {"dataloaders": loaders}}
    section = checklist.evaluate(fingerprint, CONFIG, {"A": flags(), "B": flags()})
    by_id = {item["id"]: item for item in section["items"]}
    assert (by_id["dataloader_workers"]["status"], by_id["lockfile"]["status"]) == (
        "fail", "fail")

    weighed = checklist.weighed(section, runs_agreed=True)
    after = {item["id"]: item for item in weighed["items"]}
    # Runs A and B agreed: the unseeded workers changed nothing here; a missing lock is
    # about another environment, which two runs on one machine cannot contradict.
    assert after["dataloader_workers"]["status"] == "risk"
    assert after["dataloader_workers"]["detail"].endswith(f"({checklist.RISK_NOTE})")
    assert after["dataloader_workers"]["fix"] == by_id["dataloader_workers"]["fix"]
    assert after["lockfile"]["status"] == "fail"
    assert (weighed["counts"]["risk"], weighed["counts"]["fail"]) == (
        1, section["counts"]["fail"] - 1)
    assert checklist.weighed(section, runs_agreed=False) == section
