"""One artifact of run A against the same path of run B: the comparison its extension picks,
and the result two loaded checkpoints make (unequal tensors and values listed, equal counted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from repro_gate.compare.artifacts import checkpoint_result, compare_artifact, union
from repro_gate.compare.checkpoints import Checkpoint
from repro_gate.compare.fields import parse_pattern
from repro_gate.compare.tolerance import Tolerance


def pair(tmp_path: Path, name: str, content_a: bytes, content_b: bytes) -> tuple[Path, Path]:
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    for path, content in ((a, content_a), (b, content_b)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return a, b


def test_json_and_yaml_are_compared_key_by_key_with_ignored_fields_left_out(
        tmp_path: Path) -> None:
    a, b = pair(tmp_path, "m.json", json.dumps({"loss": 1.0, "time": 3}).encode(),
                json.dumps({"loss": 1.0, "time": 4}).encode())
    assert compare_artifact(a, b, "m.json", None)["status"] == "different"
    ignored = compare_artifact(a, b, "m.json", None, (parse_pattern("time"),))
    assert (ignored["kind"], ignored["status"]) == ("json", "equal")
    a, b = pair(tmp_path, "c.YML", b"lr: 0.1\n", b"lr: 0.2\n")
    result = compare_artifact(a, b, "c.YML", None)
    assert (result["kind"], result["status"]) == ("yaml", "different")
    assert [key["key"] for key in result["keys"]] == ["lr"]


def test_other_files_are_compared_by_bytes_and_say_when_ignore_cannot_apply(
        tmp_path: Path) -> None:
    a, b = pair(tmp_path, "vocab.txt", b"a\nb\n", b"a\nb\n")
    plain = compare_artifact(a, b, "vocab.txt", None)
    assert (plain["kind"], plain["status"], "note" in plain) == ("bytes", "equal", False)
    noted = compare_artifact(a, b, "vocab.txt", None, (parse_pattern("x"),))
    assert noted["note"] == (
        "compare.ignore not applied: fields are only left out of JSON/YAML files")


def test_a_bin_file_that_is_no_torch_checkpoint_falls_back_to_bytes(tmp_path: Path) -> None:
    a, b = pair(tmp_path, "weights.bin", b"\x00" * 16, b"\x01" * 16)
    result = compare_artifact(a, b, "weights.bin", None)
    assert (result["kind"], result["status"]) == ("bytes", "different")
    assert "not a PyTorch checkpoint" in result["note"]


def test_safetensors_are_compared_tensor_by_tensor(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    weight = np.linspace(0, 1, 8, dtype=np.float32)
    save_file({"w": weight, "b": np.zeros(2, np.float32)}, str(tmp_path / "a" / "m.safetensors"))
    save_file({"w": weight + np.float32(1e-6), "b": np.zeros(2, np.float32)},
              str(tmp_path / "b" / "m.safetensors"))
    a, b = tmp_path / "a" / "m.safetensors", tmp_path / "b" / "m.safetensors"
    bitwise = compare_artifact(a, b, "m.safetensors", None)
    assert (bitwise["kind"], bitwise["status"]) == ("safetensors", "different")
    assert [t["name"] for t in bitwise["tensors"]] == ["w"]
    assert bitwise["note"] == "1 of 2 tensors bitwise equal (equal ones not listed)"
    assert "tolerance" not in bitwise
    loose = compare_artifact(a, b, "m.safetensors", Tolerance(atol=1e-5))
    assert loose["status"] == "within_tolerance"
    assert loose["tolerance"] == {"atol": 1e-5, "rtol": 0.0}


def test_one_sided_and_mismatched_tensors_and_values_are_listed() -> None:
    a = Checkpoint(tensors={"w": np.zeros(3, np.float32), "only_a": np.ones(1)},
                   values={"step": 10, "lr": 0.1})
    b = Checkpoint(tensors={"w": np.zeros(4, np.float32), "only_b": np.ones(2, np.int8)},
                   values={"step": 10, "epoch": 2})
    result = checkpoint_result("ckpt.pt", "torch", a, b, None)
    assert result["status"] == "different"
    assert [(t["name"], t["status"]) for t in result["tensors"]] == [
        ("w", "shape_mismatch"), ("only_a", "missing_in_b"), ("only_b", "missing_in_a")]
    assert [(k["key"], k["status"]) for k in result["keys"]] == [
        ("lr", "missing_in_b"), ("epoch", "missing_in_a")]
    assert result["note"] == ("0 of 3 tensors bitwise equal (equal ones not listed); "
                              "1 of 3 other values equal; "
                              "w: float32[3] in A, float32[4] in B")


def test_equal_checkpoints_list_nothing_but_count_everything() -> None:
    tensors = {"w": np.arange(4, dtype=np.float64)}
    result = checkpoint_result("m.pt", "torch", Checkpoint(dict(tensors), {"step": 3}),
                               Checkpoint(dict(tensors), {"step": 3}), None)
    assert result == {"path": "m.pt", "kind": "torch", "status": "equal",
                      "note": "1 of 1 tensors bitwise equal (equal ones not listed); "
                              "1 of 1 other values equal"}


def test_union_keeps_the_first_order_then_the_second_s_new_names() -> None:
    assert union({"b": 1, "a": 2}, {"c": 3, "a": 4, "d": 5}) == ["b", "a", "c", "d"]
