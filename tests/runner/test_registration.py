"""Runner names and labels the service registers with, and a registration that cannot get a
token: it stops before any request, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.runner_files import token_file, write_config

from repro_gate.errors import ConfigError
from repro_gate.runner.registration import (
    MAX_NAME,
    Registrar,
    runner_labels,
    runner_name,
    runner_name_stem,
    slug,
)
from repro_gate.runner.runner_config import load_runner_config
from repro_gate.runner.slots import Slot

H100 = Slot(1, "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d", "NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize(("model", "label"), [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "nvidia-a100-sxm4-40gb-mig-3g.20gb"),
    ("  (Tesla) V100 / PCIe  ", "tesla-v100-pcie"),
    ("***", "gpu"),
    ("x" * 150, "x" * 100),
])
def test_a_gpu_model_becomes_a_label_github_accepts(model: str, label: str) -> None:
    assert slug(model) == label


def test_a_runner_name_is_prefix_host_and_slot_index() -> None:
    assert runner_name("repro-gate", "gpuhost", H100) == "repro-gate-gpuhost-slot1"
    assert runner_name_stem("repro-gate", "gpuhost") == "repro-gate-gpuhost-slot"


def test_a_long_prefix_and_host_are_cut_never_the_slot_index() -> None:
    names = [runner_name("p" * 40, "h" * 40, Slot(index, H100.uuid, H100.model))
             for index in (7, 123)]

    assert [len(name) for name in names] == [MAX_NAME - 2, MAX_NAME]
    assert [name.rpartition("-slot")[2] for name in names] == ["7", "123"]


def test_labels_begin_with_the_fixed_ones_and_repeat_none() -> None:
    assert runner_labels(("gpu", "pool-a", "repro-gate", "pool-b"), H100) == (
        "self-hosted", "gpu", "nvidia-h100-80gb-hbm3", "repro-gate", "pool-a", "pool-b")


def test_a_token_file_gone_stops_a_registration_before_any_request(tmp_path: Path) -> None:
    github = {"repository": "octo-org/trainer", "api_url": "http://127.0.0.1:9",
              "auth": {"token_file": token_file(tmp_path).name}}
    registrar = Registrar(load_runner_config(write_config(tmp_path, github)))
    (tmp_path / "token").unlink()

    with pytest.raises(ConfigError, match=f"cannot read token file {tmp_path / 'token'}"):
        registrar.register(H100)
