"""The restricted unpickler of torch.save's data.pkl: tensors come out as records of their
storage, offset, shape and strides; any global but the few a checkpoint needs refuses the file,
and a pickle that breaks the format is corrupt. The pickles are written opcode by opcode."""

from __future__ import annotations

import io
import struct
from collections import OrderedDict

import pytest

from repro_gate.compare.torch_pickle import (
    Corrupt,
    DType,
    Refused,
    Size,
    StorageRef,
    TensorRecord,
    latin1_bytes,
    tensor_record,
    unpickle,
)

REBUILD_V2 = ("torch._utils", "_rebuild_tensor_v2")


def glob(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


def text(value: str) -> bytes:
    raw = value.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def num(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def call(module: str, name: str, *args: bytes) -> bytes:
    return glob(module, name) + tup(*args) + b"R"


def storage(kind: str, key: str, numel: int) -> bytes:
    pid = tup(text("storage"), glob("torch", kind), text(key), text("cpu"), num(numel))
    return pid + b"Q"


def tensor(shape: tuple[int, ...], stride: tuple[int, ...], *, kind: str = "FloatStorage",
           key: str = "0", offset: int = 0, hooks: bytes = b"", metadata: bytes = b"") -> bytes:
    hooks = hooks or call("collections", "OrderedDict")
    extra = (metadata,) if metadata else ()
    return call(*REBUILD_V2, storage(kind, key, 6), num(offset), tup(*map(num, shape)),
                tup(*map(num, stride)), b"\x89", hooks, *extra)


def mapping(**items: bytes) -> bytes:
    return b"}(" + b"".join(text(k) + v for k, v in items.items()) + b"u"


def load(body: bytes) -> tuple[object, dict[str, StorageRef]]:
    storages: dict[str, StorageRef] = {}
    return unpickle(io.BytesIO(b"\x80\x02" + body + b"."), storages), storages


def test_a_state_dict_of_tensors_comes_out_as_records_and_storages() -> None:
    tree, storages = load(mapping(weight=tensor((2, 3), (3, 1)),
                                  bias=tensor((3,), (1,), offset=3), step=num(7)))
    assert isinstance(tree, dict)
    assert tree["step"] == 7
    ref = StorageRef("0", "float32", 6)
    assert storages == {"0": ref}
    assert tree["weight"] == TensorRecord(ref, 0, (2, 3), (3, 1), "float32")
    assert tree["bias"] == TensorRecord(ref, 3, (3,), (1,), "float32")


def test_newer_dtypes_come_from_untyped_storages_with_their_dtype() -> None:
    body = call("torch._utils", "_rebuild_tensor_v3", storage("UntypedStorage", "k", 8),
                num(0), tup(num(4)), tup(num(1)), b"\x89", call("collections", "OrderedDict"),
                glob("torch", "bfloat16"))
    record, storages = load(body)
    assert isinstance(record, TensorRecord)
    assert (record.dtype, storages["k"].dtype) == ("bfloat16", "uint8")


def test_parameters_sizes_and_ordered_dicts_are_plain_values() -> None:
    parameter = call("torch._utils", "_rebuild_parameter", tensor((2,), (1,)), b"\x88",
                     call("collections", "OrderedDict"))
    size = glob("torch", "Size") + tup(tup(num(2), num(5))) + b"R"
    tree, _ = load(tup(parameter, size, glob("torch", "float16"),
                       call("collections", "OrderedDict")))
    assert isinstance(tree, tuple)
    assert isinstance(tree[0], TensorRecord) and tree[0].shape == (2,)
    assert isinstance(tree[1], Size) and tree[1] == (2, 5)
    assert tree[2] == DType("float16") and repr(tree[2]) == "torch.float16"
    assert tree[3] == OrderedDict()


@pytest.mark.parametrize(("body", "named"), [
    (call("os", "system", text("echo hi")), "os.system"),
    (call("builtins", "eval", text("1")), "builtins.eval"),
    (call("torch.nn.modules.linear", "Linear"), "torch.nn.modules.linear.Linear"),
    (text("x") + b"Q", "persistent id x"),
])
def test_any_other_global_or_reference_refuses_the_file_by_name(body: bytes, named: str) -> None:
    with pytest.raises(Refused, match=named):
        load(body)


def test_hooks_and_unknown_tensor_metadata_are_refused() -> None:
    hooks = glob("collections", "OrderedDict") + b")R(" + num(1) + num(2) + b"u"
    with pytest.raises(Refused, match="backward hooks"):
        load(tensor((1,), (1,), hooks=hooks))
    with pytest.raises(Refused, match="tensor metadata"):
        load(tensor((1,), (1,), metadata=mapping(sparse=b"\x88")))
    record, _ = load(tensor((1,), (1,), metadata=mapping(neg=b"\x88")))
    assert isinstance(record, TensorRecord) and (record.neg, record.conj) == (True, False)


def test_a_shape_and_stride_of_different_lengths_are_corrupt() -> None:
    with pytest.raises(Corrupt, match="shape and stride differ"):
        load(tensor((2, 3), (1,)))
    with pytest.raises(Corrupt, match="storage offset"):
        load(tensor((2,), (1,), offset=-1))


def test_a_truncated_pickle_is_corrupt_with_what_broke() -> None:
    with pytest.raises(Corrupt, match="corrupt pickle data"):
        unpickle(io.BytesIO(b"\x80\x02" + tup(num(1))[:-1]), {})


def test_tensor_record_checks_its_arguments() -> None:
    ref = StorageRef("0", "int64", 4)
    assert tensor_record(ref, 1, [3], [1], "int64", {"conj": True}).conj is True
    with pytest.raises(Corrupt, match="not a storage"):
        tensor_record("0", 0, (1,), (1,), "int64", None)
    with pytest.raises(Corrupt, match="shape is not a list of non-negative integers"):
        tensor_record(ref, 0, (True,), (1,), "int64", None)


def test_codecs_encode_gives_only_latin1_bytes() -> None:
    assert latin1_bytes("\xff\x00a") == b"\xff\x00a"
    with pytest.raises(Refused, match="latin-1"):
        latin1_bytes("x", "utf-8")
