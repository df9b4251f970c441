"""The machine class of a fingerprint: the accelerator's model and count, or the CPU's vendor
and model; drivers and software never part of it."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.golden.machine_class import cpu_model, gpu_model, machine_class


def gpus(*names: str) -> dict[str, Any]:
    return {"hardware": {"gpus": [{"index": i, "name": n} for i, n in enumerate(names)],
                         "cpu": {"model": "AMD EPYC 7763 64-Core Processor"},
                         "driver_version": "550.54.15"}}


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA A10G", "a10g"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("Tesla V100-SXM2-16GB", "v100"),
    ("AMD Instinct MI300X", "mi300x"),
    ("", "unknown"),
])
def test_a_gpu_is_named_by_its_words_up_to_the_model_number(name: str, model: str) -> None:
    assert gpu_model(name) == model


@pytest.mark.parametrize(("model", "slug"), [
    ("AMD EPYC 7763 64-Core Processor", "amd-epyc-7763"),
    ("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "intel-xeon-platinum"),
    ("AMD EPYC", "amd-epyc"),
    ("Apple M2", "apple-m2"),
    ("", "unknown"),
])
def test_a_cpu_is_named_by_vendor_and_model_without_marketing(model: str, slug: str) -> None:
    assert cpu_model(model) == slug


def test_a_gpu_machine_is_its_first_gpu_and_the_count() -> None:
    assert machine_class(gpus("NVIDIA H100 80GB HBM3")) == "gpu-h100-x1"
    assert machine_class(gpus(*["NVIDIA H100 80GB HBM3"] * 8)) == "gpu-h100-x8"


def test_without_a_gpu_the_cpu_names_the_machine() -> None:
    assert machine_class(gpus()) == "cpu-amd-epyc-7763"
    # No model known: the architecture, in the slug's characters.
    assert machine_class({"hardware": {"cpu": {"machine": "x86_64"}}}) == "cpu-x86-64"
    assert machine_class({}) == "cpu-unknown"


def test_the_driver_is_not_part_of_the_class() -> None:
    newer = gpus("NVIDIA A10G")
    newer["hardware"]["driver_version"] = "560.1"
    assert machine_class(newer) == machine_class(gpus("NVIDIA A10G")) == "gpu-a10g-x1"
