"""torch.load(weights_only=True) for files the restricted reader refuses: its tensors become
numpy arrays with the same bits, bfloat16 and float8 included, whatever their layout."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from repro_gate.compare.dtypes import NUMPY_DTYPES
from repro_gate.compare.torch_fallback import plain, to_numpy, to_numpy_tree, torch_load
from repro_gate.compare.torch_pickle import Refused, Size


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_types_numpy_lacks_keep_their_bits(dtype: torch.dtype) -> None:
    tensor = torch.tensor([0.5, -1.25, 3.0, 0.0]).to(dtype)
    array = to_numpy(tensor)
    name = str(dtype).removeprefix("torch.")
    assert array.dtype == NUMPY_DTYPES[name]
    size = tensor.element_size()
    signed = {1: torch.int8, 2: torch.int16}[size]
    assert array.tobytes() == tensor.view(signed).numpy().tobytes()
    np.testing.assert_array_equal(array.astype(np.float32), tensor.float().numpy())


def test_lazy_negation_views_and_sparse_tensors_are_made_plain() -> None:
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    np.testing.assert_array_equal(to_numpy(base.t()), base.numpy().T)
    negated = torch._neg_view(base)
    assert negated.is_neg()
    np.testing.assert_array_equal(to_numpy(negated), -base.numpy())
    conjugated = torch.tensor([1 + 2j, 3 - 1j]).conj()
    assert conjugated.is_conj()
    np.testing.assert_array_equal(to_numpy(conjugated), np.array([1 - 2j, 3 + 1j]))
    sparse = torch.eye(3).to_sparse()
    np.testing.assert_array_equal(to_numpy(sparse), np.eye(3, dtype=np.float32))
    assert plain(torch.ones(2, requires_grad=True)).requires_grad is False


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_a_dtype_without_a_numpy_type_is_refused_by_name() -> None:
    with pytest.raises(Refused, match="tensors of dtype complex32"):
        to_numpy(torch.zeros(2, dtype=torch.complex32))


def test_a_loaded_tree_keeps_its_containers_and_makes_sizes_leaves() -> None:
    tree = {"state": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), 3)],
            "shape": torch.Size([4, 2]), "lr": 0.1}
    converted = to_numpy_tree(tree)
    assert isinstance(converted["state"], list) and isinstance(converted["state"][1], tuple)
    np.testing.assert_array_equal(converted["state"][0], np.ones(2, dtype=np.float32))
    assert converted["state"][1][0].dtype == np.int64 and converted["state"][1][1] == 3
    assert isinstance(converted["shape"], Size) and converted["shape"] == (4, 2)
    assert converted["lr"] == 0.1


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_load_reads_both_layouts_on_the_cpu(tmp_path: Path, legacy: bool) -> None:
    path = tmp_path / "model.pt"
    saved = {"w": torch.arange(4, dtype=torch.float64), "step": 5}
    torch.save(saved, path, _use_new_zipfile_serialization=not legacy)
    loaded = torch_load(path, "legacy" if legacy else "zip")
    assert loaded["step"] == 5
    assert torch.equal(loaded["w"], saved["w"]) and loaded["w"].device.type == "cpu"


def test_torch_load_never_builds_an_arbitrary_object(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"model": torch.nn.Linear(2, 1)}, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch_load(path, "zip")
