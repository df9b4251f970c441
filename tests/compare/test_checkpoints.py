"""Comparing torch and safetensors checkpoints tensor by tensor, through compare_artifact."""

from __future__ import annotations

import os
import pathlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from referencing import Registry, Resource
from safetensors.torch import save_file

from repro_gate import validation
from repro_gate.compare import Tolerance, compare_artifact, tolerance_for
from repro_gate.config import ToleranceConfig
from repro_gate.errors import GateError


def artifact_errors(result: dict[str, Any]) -> list[str]:
    manifest = validation.load("manifest")
    registry = Registry().with_resource(manifest["$id"], Resource.from_contents(manifest))
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"{manifest['$id']}#/$defs/artifact_comparison"}, registry=registry
    )
    return [error.message for error in validator.iter_errors(result)]


def compare(a: Path, b: Path, rel_path: str, tolerance: Tolerance | None = None) -> dict:
    result = compare_artifact(a, b, rel_path, tolerance)
    assert artifact_errors(result) == []
    return result


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.head = torch.nn.Linear(8, 2)


def state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return Net().state_dict()


def save(obj: Any, path: Path, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path, **kwargs)
    return path


def next_float_up(value: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(value, torch.tensor(float("inf"), dtype=value.dtype))


@pytest.mark.parametrize("zipfile_format", [True, False])
def test_identical_state_dicts_are_equal_and_equal_tensors_are_only_counted(
    tmp_path: Path, zipfile_format: bool
) -> None:
    options = {"_use_new_zipfile_serialization": zipfile_format}
    a = save({"model": state_dict()}, tmp_path / "a" / "model.pt", **options)
    b = save({"model": state_dict()}, tmp_path / "b" / "model.pt", **options)

    result = compare(a, b, "model.pt")

    assert result["kind"] == "torch"
    assert result["status"] == "equal"
    assert "tensors" not in result
    assert result["note"].startswith("4 of 4 tensors bitwise equal")


def test_one_ulp_in_one_element_is_reported_with_its_dotted_name(tmp_path: Path) -> None:
    weights_a = state_dict()
    weights_b = state_dict()
    weights_b["conv.weight"][1, 0, 2, 1] = next_float_up(weights_b["conv.weight"][1, 0, 2, 1])
    a = save({"model": weights_a}, tmp_path / "a.pt")
    b = save({"model": weights_b}, tmp_path / "b.pt")

    result = compare(a, b, "ckpt/last.pt")

    assert result["status"] == "different"
    assert result["path"] == "ckpt/last.pt"
    [diff] = result["tensors"]
    assert diff["name"] == "model.conv.weight"
    assert diff["status"] == "different"
    assert diff["max_ulp"] == 1
    assert diff["differing_elements"] == 1
    assert diff["total_elements"] == 18
    assert diff["dtype"] == "float32"
    assert diff["shape"] == [2, 1, 3, 3]
    original = float(weights_a["conv.weight"][1, 0, 2, 1])
    assert diff["max_abs_diff"] == pytest.approx(abs(original) * 2**-23, rel=1.0)
    assert "3 of 4 tensors bitwise equal" in result["note"]


def train_with_adam(steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs = torch.randn(16, 4)
    for _ in range(steps):
        optimizer.zero_grad()
        model(inputs).square().mean().backward()
        optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": steps}


def test_adam_optimizer_state_is_compared_under_nested_names(tmp_path: Path) -> None:
    a = save(train_with_adam(2), tmp_path / "a.pt")
    same = save(train_with_adam(2), tmp_path / "same.pt")
    later = save(train_with_adam(3), tmp_path / "later.pt")

    assert compare(a, same, "state.pt")["status"] == "equal"
    result = compare(a, later, "state.pt")

    assert result["status"] == "different"
    names = [diff["name"] for diff in result["tensors"]]
    assert names == [
        "model.weight",
        "model.bias",
        "optimizer.state.0.step",
        "optimizer.state.0.exp_avg",
        "optimizer.state.0.exp_avg_sq",
        "optimizer.state.1.step",
        "optimizer.state.1.exp_avg",
        "optimizer.state.1.exp_avg_sq",
    ]
    assert result["keys"] == [
        {"key": "epoch", "status": "different", "a": 2, "b": 3, "abs_diff": 1.0}
    ]
    assert "optimizer.param_groups.0.lr" not in {key["key"] for key in result["keys"]}


def test_tolerance_accepts_a_tiny_difference_and_rejects_a_big_one(tmp_path: Path) -> None:
    weights = state_dict()
    tiny = {name: tensor.clone() for name, tensor in weights.items()}
    tiny["head.weight"] += 1e-7
    big = {name: tensor.clone() for name, tensor in weights.items()}
    big["head.bias"] += 0.5
    a = save(weights, tmp_path / "a.pt")
    tolerance = Tolerance(atol=1e-6, rtol=1e-5)

    within = compare(a, save(tiny, tmp_path / "tiny.pt"), "m.pt", tolerance)
    beyond = compare(a, save(big, tmp_path / "big.pt"), "m.pt", tolerance)

    assert within["status"] == "within_tolerance"
    assert within["tolerance"] == {"atol": 1e-6, "rtol": 1e-5}
    assert [(d["name"], d["status"]) for d in within["tensors"]] == [
        ("head.weight", "within_tolerance")
    ]
    assert beyond["status"] == "different"
    [diff] = beyond["tensors"]
    assert (diff["name"], diff["status"]) == ("head.bias", "different")
    assert diff["max_abs_diff"] == pytest.approx(0.5, abs=1e-6)
    assert compare(a, save(tiny, tmp_path / "tiny2.pt"), "m.pt")["status"] == "different"


def test_per_artifact_glob_picks_the_tolerance_that_decides_the_verdict(tmp_path: Path) -> None:
    weights = state_dict()
    shifted = {name: tensor + 1e-3 for name, tensor in weights.items()}
    a = save(weights, tmp_path / "a.pt")
    b = save(shifted, tmp_path / "b.pt")
    config = ToleranceConfig.from_document(
        {"atol": 1e-6, "per_artifact": [{"glob": "ema/*.pt", "atol": 1e-2}]}
    )

    loose = compare(a, b, "ema/model.pt", tolerance_for(config, "ema/model.pt"))
    strict = compare(a, b, "final/model.pt", tolerance_for(config, "final/model.pt"))

    assert (loose["status"], loose["tolerance"]) == (
        "within_tolerance",
        {"atol": 1e-2, "rtol": 0.0},
    )
    assert (strict["status"], strict["tolerance"]) == ("different", {"atol": 1e-6, "rtol": 0.0})


def test_bitwise_facts_nan_equals_nan_and_signed_zeros_are_one_ulp_apart(tmp_path: Path) -> None:
    a = save({"x": torch.tensor([float("nan"), -0.0, 1.0])}, tmp_path / "a.pt")
    b = save({"x": torch.tensor([float("nan"), 0.0, 1.0])}, tmp_path / "b.pt")

    bitwise = compare(a, b, "x.pt")
    tolerant = compare(a, b, "x.pt", Tolerance())

    [diff] = bitwise["tensors"]
    assert (diff["status"], diff["differing_elements"], diff["max_ulp"]) == ("different", 1, 1)
    assert diff["max_abs_diff"] == 0.0
    assert tolerant["status"] == "within_tolerance"


def test_float64_ulp_distance_across_zero_is_exact(tmp_path: Path) -> None:
    a = save({"x": torch.tensor([1.0, 2.0], dtype=torch.float64)}, tmp_path / "a.pt")
    b = save({"x": torch.tensor([-1.0, 2.0], dtype=torch.float64)}, tmp_path / "b.pt")

    [diff] = compare(a, b, "x.pt")["tensors"]

    one_bits = 0x3FF0000000000000  # the bit pattern of 1.0
    assert diff["max_ulp"] == 2 * one_bits + 1
    assert (diff["max_abs_diff"], diff["max_rel_diff"]) == (2.0, 2.0)


def test_integer_tensors_have_no_ulp_and_bfloat16_has_one(tmp_path: Path) -> None:
    half = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    a = save({"steps": torch.tensor([1, 2]), "h": half}, tmp_path / "a.pt")
    b = save({"steps": torch.tensor([1, 5]), "h": next_float_up(half)}, tmp_path / "b.pt")

    steps, bf16 = compare(a, b, "x.pt")["tensors"]

    assert (steps["name"], steps["max_ulp"], steps["max_abs_diff"]) == ("steps", None, 3.0)
    assert (bf16["name"], bf16["dtype"], bf16["max_ulp"], bf16["differing_elements"]) == (
        "h",
        "bfloat16",
        1,
        2,
    )


def test_shape_dtype_mismatch_and_one_sided_tensors_make_the_artifact_different(
    tmp_path: Path,
) -> None:
    a = save(
        {"w": torch.zeros(2, 3), "d": torch.zeros(2), "only_a": torch.ones(1)}, tmp_path / "a.pt"
    )
    b = save(
        {"w": torch.zeros(3, 2), "d": torch.zeros(2, dtype=torch.float64), "only_b": torch.ones(1)},
        tmp_path / "b.pt",
    )

    result = compare(a, b, "m.pt")

    assert result["status"] == "different"
    assert [(d["name"], d["status"]) for d in result["tensors"]] == [
        ("w", "shape_mismatch"),
        ("d", "dtype_mismatch"),
        ("only_a", "missing_in_b"),
        ("only_b", "missing_in_a"),
    ]
    assert "w: float32[2, 3] in A, float32[3, 2] in B" in result["note"]
    assert "d: float32[2] in A, float64[2] in B" in result["note"]


class CreatesMarkerWhenUnpickled:
    """Unpickling this object creates a file: proof of whether a loader ran the pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("zipfile_format", [True, False])
def test_a_checkpoint_weights_only_refuses_is_compared_by_bytes_and_never_unpickled(
    tmp_path: Path, zipfile_format: bool
) -> None:
    marker = tmp_path / "unpickled.marker"
    payload = {"model": state_dict(), "extra": CreatesMarkerWhenUnpickled(marker)}
    options = {"_use_new_zipfile_serialization": zipfile_format}
    a = save(payload, tmp_path / "a" / "model.pt", **options)
    b = save(payload, tmp_path / "b" / "model.pt", **options)

    result = compare(a, b, "model.pt")

    assert not marker.exists()
    assert result["kind"] == "bytes"
    assert result["status"] == "equal"
    assert result["sha256_a"] == result["sha256_b"]
    assert "never unpickled" in result["note"]
    assert "model.state_dict()" in result["note"]
    assert "safetensors" in result["note"]
    # Control: a full unpickler would have run the payload.
    torch.load(a, weights_only=False)
    assert marker.exists()


def test_a_pickled_module_is_compared_by_bytes_with_a_hint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    a = save(Net(), tmp_path / "a.pt")
    torch.manual_seed(1)
    b = save(Net(), tmp_path / "b.pt")

    result = compare(a, b, "net.pth")

    assert (result["kind"], result["status"]) == ("bytes", "different")
    assert "Net" in result["note"]
    assert "torch.save(model.state_dict(), ...)" in result["note"]


def test_a_truncated_checkpoint_is_a_gate_error(tmp_path: Path) -> None:
    a = save(state_dict(), tmp_path / "a.pt")
    b = tmp_path / "b.pt"
    b.write_bytes(a.read_bytes()[: a.stat().st_size // 2])

    with pytest.raises(GateError) as raised:
        compare_artifact(a, b, "ckpt/model.pt", None)

    assert raised.value.kind == "checkpoint_unreadable"
    message = str(raised.value)
    assert message.startswith("cannot read checkpoint ckpt/model.pt from run B: ")
    assert "\n" not in message


def test_a_truncated_legacy_checkpoint_is_a_gate_error(tmp_path: Path) -> None:
    a = save(state_dict(), tmp_path / "a.pt", _use_new_zipfile_serialization=False)
    (tmp_path / "cut.pt").write_bytes(a.read_bytes()[:200])

    with pytest.raises(GateError, match="from run A: corrupt pickle data") as raised:
        compare_artifact(tmp_path / "cut.pt", a, "old.pt", None)
    assert raised.value.kind == "checkpoint_unreadable"


def test_text_with_a_checkpoint_extension_is_a_gate_error(tmp_path: Path) -> None:
    (tmp_path / "a.ckpt").write_text("not a checkpoint\n")
    b = save(state_dict(), tmp_path / "b.ckpt")

    with pytest.raises(GateError, match=r"cannot read checkpoint m\.ckpt from run A: not a torch"):
        compare_artifact(tmp_path / "a.ckpt", b, "m.ckpt", None)


def test_a_bin_file_that_is_no_checkpoint_is_compared_by_bytes(tmp_path: Path) -> None:
    data = os.urandom(4096)
    (tmp_path / "a.bin").write_bytes(data)
    (tmp_path / "b.bin").write_bytes(data[:-1] + b"\0")

    result = compare(tmp_path / "a.bin", tmp_path / "b.bin", "data/shard.bin")

    assert (result["kind"], result["status"]) == ("bytes", "different")
    assert "not a PyTorch checkpoint" in result["note"]


def test_a_bin_file_that_is_a_checkpoint_is_compared_by_tensor(tmp_path: Path) -> None:
    a = save(state_dict(), tmp_path / "a" / "pytorch_model.bin")
    b = save(state_dict(seed=1), tmp_path / "b" / "pytorch_model.bin")

    result = compare(a, b, "pytorch_model.bin")

    assert result["kind"] == "torch"
    assert [d["name"] for d in result["tensors"]] == [
        "conv.weight",
        "conv.bias",
        "head.weight",
        "head.bias",
    ]


def test_safetensors_equal_and_different(tmp_path: Path) -> None:
    weights = state_dict()
    save_file(weights, tmp_path / "a.safetensors", metadata={"format": "pt"})
    save_file(weights, tmp_path / "b.safetensors", metadata={"format": "pt"})
    changed = {name: tensor.clone() for name, tensor in weights.items()}
    changed["head.bias"][0] = next_float_up(changed["head.bias"][0])
    save_file(changed, tmp_path / "c.safetensors", metadata={"format": "np"})

    equal = compare(tmp_path / "a.safetensors", tmp_path / "b.safetensors", "m.safetensors")
    different = compare(tmp_path / "a.safetensors", tmp_path / "c.safetensors", "m.safetensors")

    assert (equal["kind"], equal["status"]) == ("safetensors", "equal")
    assert different["status"] == "different"
    [diff] = different["tensors"]
    assert (diff["name"], diff["max_ulp"], diff["differing_elements"]) == ("head.bias", 1, 1)
    assert different["keys"] == [
        {"key": "__metadata__.format", "status": "different", "a": "pt", "b": "np"}
    ]


def test_a_corrupt_safetensors_file_is_a_gate_error(tmp_path: Path) -> None:
    save_file(state_dict(), tmp_path / "a.safetensors")
    good = (tmp_path / "a.safetensors").read_bytes()
    (tmp_path / "b.safetensors").write_bytes(good[:-10])

    with pytest.raises(
        GateError, match=r"cannot read checkpoint m\.safetensors from run B: "
    ) as raised:
        compare_artifact(
            tmp_path / "a.safetensors", tmp_path / "b.safetensors", "m.safetensors", None
        )
    assert raised.value.kind == "checkpoint_unreadable"
