"""torch.save files read without torch give the results torch's own loader gives.

Files are written here with torch.save (zip and legacy formats, a big-endian byte order record);
the comparison runs in a subprocess where `import torch` fails, and must equal the comparison of
the same files loaded by `torch.load(weights_only=True)`, tensor for tensor and field for field.
"""

from __future__ import annotations

import copy
import json
import pathlib
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from repro_gate.compare import Tolerance, artifacts, checkpoints, torch_fallback
from repro_gate.compare.dtypes import NUMPY_DTYPES, byteswap_unit
from repro_gate.compare.torch_reader import read_torch_save

WITHOUT_TORCH = "import sys; sys.modules['torch'] = None  # `import torch` now fails\n"

COMPARE_WITHOUT_TORCH = WITHOUT_TORCH + """
import json
from pathlib import Path
from repro_gate.compare import Tolerance, compare_artifact
results = []
for a, b, rel, tolerance in json.loads(Path(sys.argv[1]).read_text()):
    tolerance = None if tolerance is None else Tolerance(*tolerance)
    results.append(compare_artifact(Path(a), Path(b), rel, tolerance))
assert sys.modules["torch"] is None
print(json.dumps(results))
"""

CLASSIC_DTYPES = [
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64,
    torch.complex128, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
]
# Saved as untyped bytes plus a dtype; torch's own legacy loader cannot read them back.
NEWER_DTYPES = [
    torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
    torch.uint16, torch.uint32, torch.uint64,
]
DTYPES = CLASSIC_DTYPES + NEWER_DTYPES
SIGNED = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
TOLERANCE = (1e-6, 1e-5)


def adam_state(steps: int) -> dict[str, Any]:
    """A training checkpoint: model, Adam's nested state (step tensors, param_groups), epoch."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.ones(4, 3)).square().mean().backward()
        optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": steps}


def one_ulp_up(tensor: torch.Tensor, index: tuple[Any, ...]) -> None:
    """The next representable value above each (positive, finite) element at `index`."""
    tensor.view(SIGNED[tensor.element_size()])[index] += 1


def checkpoint(dtypes: list[torch.dtype]) -> dict[str, Any]:
    """Views sharing a storage, non-contiguous and zero-size tensors, every dtype, lazy bits."""
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=generator)
    complex_values = torch.randn(3, dtype=torch.complex64, generator=generator)
    return {
        "views": {
            "base": base, "row": base[1], "column": base[:, 2], "transposed": base.t(),
            "strided": base[1:3, ::2], "expanded": base[0, :3].expand(2, 3),
        },
        "empty": {"rows": torch.zeros(0, 3), "view": base[2:2], "scalar": torch.tensor(2.5)},
        "dtypes": {str(dtype): (base.abs() * 3).to(dtype) for dtype in dtypes},
        "lazy": {"conj": complex_values.conj(), "neg": torch._neg_view(base[3])},
        "parameter": torch.nn.Parameter(base[0].clone()),
        "values": {"shape": torch.Size([2, 3]), "raw": b"\x00\xff", "betas": (0.9, 0.999),
                   "name": "run", "none": None, "flag": True},
        "training": adam_state(2),
    }


def changed(original: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint one ULP away in a shared storage, and further away elsewhere."""
    tree = copy.deepcopy(original)
    base = tree["views"]["base"]
    base[1, 2] = torch.nextafter(base[1, 2], torch.tensor(9.0))  # seen through five views
    dtypes = tree["dtypes"]
    for name in ("torch.bfloat16", "torch.float16", "torch.float64", "torch.float8_e4m3fn"):
        if name in dtypes:
            one_ulp_up(dtypes[name], (0, slice(0, 2)))
    dtypes["torch.int64"][3, 5] += 3
    dtypes["torch.bool"][0, 0] = False
    dtypes["torch.complex128"][2, 2] += 1e-9j
    tree["lazy"]["conj"][0] += 1e-7
    tree["values"]["raw"] = b"\x00\xfe"
    tree["training"] = adam_state(3)
    return tree


def save(obj: Any, path: Path, legacy: bool = False) -> Path:
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


def torch_path(path: Path) -> checkpoints.Checkpoint:
    """The file as torch.load(weights_only=True) reads it (the fallback, forced)."""
    layout = checkpoints.torch_save_layout(path)
    assert layout is not None
    loaded = torch_fallback.torch_load(path, layout)
    return checkpoints.flattened(torch_fallback.to_numpy_tree(loaded))


def reader_path(path: Path) -> checkpoints.Checkpoint:
    layout = checkpoints.torch_save_layout(path)
    assert layout is not None
    return checkpoints.flattened(read_torch_save(path, layout))


def compare_without_torch(jobs: list[tuple[Path, Path, str, Any]], tmp_path: Path) -> list[dict]:
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([[str(a), str(b), rel, tol] for a, b, rel, tol in jobs]))
    completed = subprocess.run(
        [sys.executable, "-c", COMPARE_WITHOUT_TORCH, str(jobs_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def compare_with_torch(a: Path, b: Path, rel: str, tolerance: Any) -> dict[str, Any]:
    tol = None if tolerance is None else Tolerance(*tolerance)
    result = artifacts.checkpoint_result(rel, "torch", torch_path(a), torch_path(b), tol)
    return json.loads(json.dumps(result))


def assert_same_tensors(path: Path) -> None:
    """Both readers give the same names, dtypes, shapes and bits, and the same other values."""
    ours, theirs = reader_path(path), torch_path(path)
    assert list(ours.tensors) == list(theirs.tensors)
    for name, array in ours.tensors.items():
        other = theirs.tensors[name]
        assert (name, array.dtype, array.shape) == (name, other.dtype, other.shape)
        assert array.tobytes() == other.tobytes(), name
    assert ours.values == theirs.values
    assert type(ours.values["values.shape"]) is type(theirs.values["values.shape"])


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_without_torch_the_results_equal_torch_loads(tmp_path: Path, legacy: bool) -> None:
    dtypes = CLASSIC_DTYPES if legacy else DTYPES
    a = save(checkpoint(dtypes), tmp_path / "a.pt", legacy)
    b = save(changed(checkpoint(dtypes)), tmp_path / "b.pt", legacy)
    assert_same_tensors(a)
    assert_same_tensors(b)
    jobs = [(a, b, "ckpt.pt", None), (a, b, "ckpt.pt", TOLERANCE), (a, a, "ckpt.pt", None)]

    without_torch = compare_without_torch(jobs, tmp_path)

    assert without_torch == [compare_with_torch(*job) for job in jobs]
    different, tolerant, same = without_torch
    assert same["status"] == "equal"
    assert same["note"].startswith(f"{len(reader_path(a).tensors)} of ")
    diffs = {diff["name"]: diff for diff in different["tensors"]}
    # One ULP in a shared storage shows in every view of that element, and only there.
    assert {name for name in diffs if name.startswith("views.")} == {
        "views.base", "views.row", "views.column", "views.transposed", "views.strided"}
    assert (diffs["views.row"]["max_ulp"], diffs["views.row"]["differing_elements"]) == (1, 1)
    assert diffs["dtypes.torch.bfloat16"]["dtype"] == "bfloat16"
    assert diffs["dtypes.torch.bfloat16"]["max_ulp"] == 1
    if not legacy:
        assert diffs["dtypes.torch.float8_e4m3fn"]["max_ulp"] is None
        assert diffs["dtypes.torch.float8_e4m3fn"]["differing_elements"] == 2
    assert diffs["dtypes.torch.int64"]["max_abs_diff"] == 3.0
    assert diffs["dtypes.torch.bool"]["max_abs_diff"] is None
    assert "training.optimizer.state.0.exp_avg" in diffs
    assert {key["key"] for key in different["keys"]} == {"values.raw", "training.epoch"}
    assert tolerant["tolerance"] == {"atol": 1e-6, "rtol": 1e-5}


def big_endian_copy(source: Path, target: Path, dtypes_by_key: dict[str, torch.dtype]) -> Path:
    """The archive as a big-endian machine writes it: `byteorder` says big, storages swapped."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = archive.read(info)
            folder, _, leaf = info.filename.rpartition("/")
            if leaf == "byteorder":
                data = b"big"
            elif folder.endswith("/data"):
                dtype = NUMPY_DTYPES[str(dtypes_by_key[leaf]).removeprefix("torch.")]
                unit = f"u{byteswap_unit(dtype)}"
                data = np.frombuffer(data, unit).byteswap().tobytes()
            out.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    return target


def test_a_big_endian_byte_order_record_is_honoured(tmp_path: Path) -> None:
    base = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    tensors = {str(dtype): (base.abs() * 3).to(dtype) for dtype in CLASSIC_DTYPES}
    tensors["strided view"] = tensors["torch.float32"][:, ::2]
    little = save(tensors, tmp_path / "little.pt")
    # torch numbers storages in the order the pickle first meets them.
    keys: dict[int, str] = {}
    for tensor in tensors.values():
        keys.setdefault(tensor.untyped_storage().data_ptr(), str(len(keys)))
    dtypes = {keys[t.untyped_storage().data_ptr()]: t.dtype for t in tensors.values()}
    big = big_endian_copy(little, tmp_path / "big.pt", dtypes)
    ours, theirs = reader_path(big), torch_path(big)
    for name, array in ours.tensors.items():
        assert array.tobytes() == theirs.tensors[name].tobytes(), name
        assert array.tobytes() == reader_path(little).tensors[name].tobytes(), name

    [result] = compare_without_torch([(little, big, "m.pt", None)], tmp_path)

    assert result == compare_with_torch(little, big, "m.pt", None)
    assert (result["kind"], result["status"]) == ("torch", "equal")


class Custom:
    """A class of the user's: no reader may build it."""


class CreatesMarkerWhenUnpickled:
    """Unpickling this object creates a file: proof of whether a loader ran the pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_custom_class_is_compared_by_bytes_with_the_reason(tmp_path: Path, legacy: bool) -> None:
    marker = tmp_path / "unpickled.marker"
    payload = {"model": {"w": torch.ones(2)}, "extra": CreatesMarkerWhenUnpickled(marker)}
    a = save(payload, tmp_path / "a.pt", legacy)
    custom = save({"w": torch.ones(2), "config": Custom()}, tmp_path / "c.pt", legacy)
    device = save({"w": torch.ones(2), "device": torch.device("cpu")}, tmp_path / "d.pt", legacy)

    refused, with_class, with_device = compare_without_torch(
        [(a, a, "model.pt", None), (custom, custom, "c.pt", None), (device, device, "d.pt", None)],
        tmp_path)

    assert not marker.exists()
    assert (refused["kind"], refused["status"]) == ("bytes", "equal")
    # Pickle reaches Path.touch through getattr: refused at the first global it may not build.
    assert "the checkpoint reader refused run A's file (it holds __builtin__.getattr)" in (
        refused["note"])
    assert "never unpickled" in refused["note"]
    assert (with_class["kind"], with_class["status"]) == ("bytes", "equal")
    assert f"(it holds {Custom.__module__}.Custom)" in with_class["note"]
    assert "torch.save(model.state_dict(), ...)" in refused["note"]
    # torch.device is beyond the reader: torch, when installed, reads it; without, bytes.
    assert (with_device["kind"], with_device["status"]) == ("bytes", "equal")
    assert "it holds torch.device" in with_device["note"]
    with_torch = artifacts.compare_artifact(device, device, "d.pt", None)
    assert (with_torch["kind"], with_torch["status"]) == ("torch", "equal")
    assert with_torch["note"].startswith("1 of 1 tensors bitwise equal")


def test_safetensors_without_torch_equal_torch_reading(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    base = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    kept = [dtype for dtype in DTYPES if dtype != torch.complex128]  # safetensors has no C128
    tensors = {str(dtype): (base.abs() * 3).to(dtype) for dtype in kept}
    save_file(tensors, tmp_path / "a.safetensors", metadata={"step": "1"})
    later = {name: tensor.clone() for name, tensor in tensors.items()}
    for name in ("torch.bfloat16", "torch.float8_e5m2", "torch.float32"):
        one_ulp_up(later[name], (0, 0))
    save_file(later, tmp_path / "b.safetensors", metadata={"step": "2"})
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"

    [result] = compare_without_torch([(a, b, "m.safetensors", None)], tmp_path)

    from safetensors import safe_open

    def torch_read(path: Path) -> checkpoints.Checkpoint:
        with safe_open(str(path), framework="pt") as handle:
            tree = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
            values = {f"__metadata__.{k}": v for k, v in (handle.metadata() or {}).items()}
        loaded = checkpoints.flattened(torch_fallback.to_numpy_tree(tree))
        return checkpoints.Checkpoint(loaded.tensors, values)

    expected = artifacts.checkpoint_result(
        "m.safetensors", "safetensors", torch_read(a), torch_read(b), None)
    assert result == json.loads(json.dumps(expected))
    names = {diff["name"]: diff for diff in result["tensors"]}
    assert set(names) == {"torch.bfloat16", "torch.float8_e5m2", "torch.float32"}
    assert (names["torch.bfloat16"]["dtype"], names["torch.bfloat16"]["max_ulp"]) == (
        "bfloat16", 1)
    assert result["keys"] == [
        {"key": "__metadata__.step", "status": "different", "a": "1", "b": "2"}]


def test_the_issue_example_without_torch(tmp_path: Path) -> None:
    weights = {"fc1.weight": torch.randn(4, 3, generator=torch.Generator().manual_seed(0)),
               "fc1.bias": torch.zeros(4)}
    weights["fc1.weight"][1, 2] = 3.0
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    torch.save(weights, tmp_path / "A" / "model.pt")
    weights["fc1.weight"][1, 2] = torch.nextafter(torch.tensor(3.0), torch.tensor(4.0))
    torch.save(weights, tmp_path / "B" / "model.pt")
    command = WITHOUT_TORCH + (
        "import runpy; sys.argv = ['repro-gate', *sys.argv[1:]]\n"
        "runpy.run_module('repro_gate', run_name='__main__')\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", command, "compare", "--tolerance", "atol=1e-6,rtol=0", "A", "B"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == "repro-gate compare: same"
    assert ("model.pt: within tolerance: 1 tensors differ, first fc1.weight (1 elements,"
            " max abs diff 2.38e-07, max ULP 1)") in completed.stdout
