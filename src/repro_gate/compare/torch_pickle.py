"""The pickle of a torch.save file read without torch and without ever running its code.

`RestrictedUnpickler.find_class` hands out local stand-ins for the few globals a checkpoint of
tensors needs (the tensor-rebuild functions, storage classes, dtypes, `torch.Size`,
`OrderedDict`); every other global refuses the whole file. Tensors come out as `TensorRecord`s
(storage, offset, shape, strides, dtype): their bytes are read later by `torch_reader`.
"""

from __future__ import annotations

import collections
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from repro_gate.compare.dtypes import NUMPY_DTYPES, STORAGE_DTYPES

# The tensor metadata torch records (lazy conjugate and negative bits); anything else refuses.
KNOWN_METADATA = frozenset({"conj", "neg"})


class Refused(Exception):
    """The file holds something this reader does not build; the message names it."""


class Corrupt(Exception):
    """The file breaks the torch.save format; the message says how."""


@dataclass(frozen=True)
class DType:
    """A torch dtype named in the pickle (`torch.float32`): a value, or a tensor's type."""

    name: str

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __setstate__(self, state: Any) -> None:
        raise Refused("a torch.dtype with state")


@dataclass(frozen=True)
class StorageType:
    """A storage class named in a persistent id (`torch.FloatStorage`, `torch.UntypedStorage`)."""

    dtype: str

    def __setstate__(self, state: Any) -> None:
        raise Refused("a storage class with state")


@dataclass(frozen=True)
class StorageRef:
    """One storage of the file: its key (`data/<key>` in a zip) and its element type."""

    key: str
    dtype: str
    numel: int

    def __setstate__(self, state: Any) -> None:
        raise Refused("a storage with state")


@dataclass
class TensorRecord:
    """A tensor as the pickle describes it; `torch_reader` reads its elements."""

    storage: StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    conj: bool = False
    neg: bool = False

    def __setstate__(self, state: Any) -> None:
        raise Refused("a tensor with Python attributes")


class Size(tuple[int, ...]):
    """`torch.Size`: a tuple that is one value (a leaf), not a list of values."""

    def __setstate__(self, state: Any) -> None:
        raise Refused("a torch.Size with state")


def ints(value: Any, what: str) -> tuple[int, ...]:
    """`value` as a tuple of non-negative ints, or Corrupt."""
    if not isinstance(value, (tuple, list)) or not all(
        type(item) is int and item >= 0 for item in value
    ):
        raise Corrupt(f"a tensor's {what} is not a list of non-negative integers")
    return tuple(value)


def tensor_record(
    storage: Any, offset: Any, shape: Any, stride: Any, dtype: str, metadata: Any
) -> TensorRecord:
    """A checked `TensorRecord` from the arguments of a rebuild function."""
    if not isinstance(storage, StorageRef):
        raise Corrupt("a tensor is rebuilt from something that is not a storage")
    if type(offset) is not int or offset < 0:
        raise Corrupt("a tensor's storage offset is not a non-negative integer")
    shape, stride = ints(shape, "shape"), ints(stride, "stride")
    if len(shape) != len(stride):
        raise Corrupt("a tensor's shape and stride differ in length")
    flags = dict(metadata or {})
    unknown = set(flags) - KNOWN_METADATA
    if not isinstance(metadata, (dict, type(None))) or unknown:
        raise Refused(f"tensor metadata {sorted(unknown) or metadata!r}")
    return TensorRecord(
        storage, offset, shape, stride, dtype, bool(flags.get("conj")), bool(flags.get("neg"))
    )


def check_hooks(hooks: Any) -> None:
    """Backward hooks are never saved by torch; a file that holds some is refused."""
    if hooks:
        raise Refused("tensor backward hooks")


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any) -> TensorRecord:
    """`torch._utils._rebuild_tensor`: the storage's own element type."""
    dtype = storage.dtype if isinstance(storage, StorageRef) else ""
    return tensor_record(storage, offset, size, stride, dtype, None)


def rebuild_tensor_v2(
    storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, hooks: Any,
    metadata: Any = None,
) -> TensorRecord:
    """`torch._utils._rebuild_tensor_v2`: a typed storage."""
    check_hooks(hooks)
    dtype = storage.dtype if isinstance(storage, StorageRef) else ""
    return tensor_record(storage, offset, size, stride, dtype, metadata)


def rebuild_tensor_v3(
    storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, hooks: Any,
    dtype: Any, metadata: Any = None,
) -> TensorRecord:
    """`torch._utils._rebuild_tensor_v3`: untyped bytes and the tensor's dtype (float8, uint16)."""
    check_hooks(hooks)
    if not isinstance(dtype, DType):
        raise Corrupt("a tensor's dtype is not a torch dtype")
    return tensor_record(storage, offset, size, stride, dtype.name, metadata)


def rebuild_parameter(data: Any, requires_grad: Any, hooks: Any, state: Any = None) -> Any:
    """`torch._utils._rebuild_parameter[_with_state]`: a Parameter compares as its data."""
    check_hooks(hooks)
    if not isinstance(data, TensorRecord):
        raise Corrupt("a parameter holds no tensor")
    return data


def latin1_bytes(text: Any, encoding: Any = "latin1") -> bytes:
    """`_codecs.encode`, the way pickle protocol 2 writes `bytes`: nothing but latin-1."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise Refused("_codecs.encode of something other than latin-1 text")
    return text.encode("latin1")


REBUILDERS: dict[tuple[str, str], Callable[..., Any] | type] = {
    ("torch._utils", "_rebuild_tensor"): rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch", "Size"): Size,
    ("_codecs", "encode"): latin1_bytes,
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only tensors, storages, dtypes and plain containers."""

    def __init__(self, stream: BinaryIO, storages: dict[str, StorageRef]) -> None:
        super().__init__(stream)
        self.storages = storages  # by key: every storage the pickle names, first use wins

    def find_class(self, module: str, name: str) -> Any:
        """The stand-in for an allowed global; any other global refuses the file."""
        found = REBUILDERS.get((module, name))
        if found is not None:
            return found
        if module in ("torch", "torch.storage"):
            if name in STORAGE_DTYPES:
                return StorageType(STORAGE_DTYPES[name])
            if name in NUMPY_DTYPES:
                return DType(name)
        raise Refused(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> StorageRef:
        """`('storage', type, key, location, numel[, view])`: a reference, read later."""
        if not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage":
            raise Refused(f"persistent id {str(pid)[:60]}")
        storage_type, key, _location, numel = pid[1:5]
        if len(pid) == 6 and pid[5] is not None:
            raise Refused("a legacy storage view")
        if not isinstance(storage_type, StorageType):
            raise Refused(f"storage type {storage_type!r}")
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise Corrupt("a storage reference without a key or size")
        return self.storages.setdefault(key, StorageRef(key, storage_type.dtype, numel))


def unpickle(stream: BinaryIO, storages: dict[str, StorageRef]) -> Any:
    """One pickle from `stream`, restricted; Refused or Corrupt when it cannot be read."""
    try:
        return RestrictedUnpickler(stream, storages).load()
    except (Refused, Corrupt):
        raise
    except RecursionError as error:
        raise Refused("containers nested too deeply") from error
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, OverflowError, MemoryError) as error:
        raise Corrupt(f"corrupt pickle data ({type(error).__name__}: {error})"[:200]) from error
