"""torch.save files read without torch: the zip format and the legacy (pre-1.6) format.

The pickle is read by `torch_pickle` (no code runs); the storages' bytes are memory-mapped
where the archive stores them uncompressed, and each tensor is cut out of its storage with its
offset, shape and strides, in the byte order the file records.
"""

from __future__ import annotations

import io
import math
import mmap
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.lib.stride_tricks import as_strided

from repro_gate.compare.dtypes import NUMPY_DTYPES, byteswap_unit
from repro_gate.compare.torch_pickle import (
    Corrupt,
    Refused,
    Size,
    StorageRef,
    TensorRecord,
    unpickle,
)

# The pickles of a legacy file before the saved object: magic number, protocol, system info.
LEGACY_HEADER_PICKLES = 3
LEGACY_PROTOCOL_VERSION = 1001
# A legacy storage starts with its element count as a little-endian int64.
LEGACY_NUMEL = struct.Struct("<q")
# A zip local file header: fixed part, then the name and the extra field.
LOCAL_HEADER = struct.Struct("<4s22xHH")
LOCAL_HEADER_SIGNATURE = b"PK\x03\x04"
BYTE_ORDERS = ("little", "big")


def data_pickle_name(archive: zipfile.ZipFile) -> str | None:
    """The `<prefix>/data.pkl` member of a torch.save zip archive."""
    return next((n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "data.pkl"), None)


def read_torch_save(path: Path, layout: str) -> Any:
    """The object a torch.save file holds, its tensors as numpy arrays.

    Raises Refused for anything but tensors, numbers, strings and containers; Corrupt when the
    file breaks the format.
    """
    storages: dict[str, StorageRef] = {}
    if layout == "zip":
        tree, buffers, byteorder = read_zip(path, storages)
    else:
        tree, buffers, byteorder = read_legacy(path, storages)
    try:
        return resolve(tree, buffers, byteorder != sys.byteorder)
    except RecursionError as error:  # containers nested past the interpreter's limit, or a cycle
        raise Refused("containers nested too deeply") from error
    except (ValueError, OverflowError) as error:  # numpy refused a shape or stride
        raise Corrupt(f"a tensor's shape or strides cannot be laid out ({error})"[:200]) from error


def read_zip(
    path: Path, storages: dict[str, StorageRef]
) -> tuple[Any, dict[str, np.ndarray], str]:
    """The object, the storages' bytes by key, and the byte order of a zip-format file."""
    with zipfile.ZipFile(path) as archive, open(path, "rb") as stream:
        name = data_pickle_name(archive)
        if name is None:
            raise Corrupt("no data.pkl in the archive")
        prefix = name[: -len("data.pkl")]
        tree = unpickle(io.BytesIO(archive.read(name)), storages)
        byteorder = zip_byteorder(archive, prefix)
        mapped = map_file(stream)
        buffers = {
            key: member_bytes(archive, mapped, f"{prefix}data/{key}", storage_bytes(ref))
            for key, ref in storages.items()
        }
    return tree, buffers, byteorder


def zip_byteorder(archive: zipfile.ZipFile, prefix: str) -> str:
    """The archive's `byteorder` record; files written before it existed are little-endian."""
    try:
        record = archive.read(f"{prefix}byteorder").decode("ascii", "replace")
    except KeyError:
        return "little"
    if record not in BYTE_ORDERS:
        raise Corrupt(f"unknown byte order {record[:20]!r}")
    return record


def map_file(stream: BinaryIO) -> mmap.mmap:
    """The whole file, memory-mapped read-only (arrays over it keep it alive)."""
    return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)


def member_bytes(
    archive: zipfile.ZipFile, mapped: mmap.mmap, name: str, nbytes: int
) -> np.ndarray:
    """The bytes of one storage record: mapped in place when stored, else decompressed."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise Corrupt(f"storage {name} is missing from the archive") from None
    if info.file_size != nbytes:
        raise Corrupt(f"storage {name} holds {info.file_size} bytes, its tensors say {nbytes}")
    if info.compress_type != zipfile.ZIP_STORED:
        return np.frombuffer(archive.read(name), dtype=np.uint8)
    signature, name_length, extra_length = LOCAL_HEADER.unpack_from(mapped, info.header_offset)
    if signature != LOCAL_HEADER_SIGNATURE:
        raise Corrupt(f"storage {name} has no local header")
    start = info.header_offset + LOCAL_HEADER.size + name_length + extra_length
    return mapped_bytes(mapped, start, nbytes, name)


def mapped_bytes(mapped: mmap.mmap, start: int, nbytes: int, what: str) -> np.ndarray:
    """`nbytes` of the mapped file from `start`, or Corrupt when the file ends first."""
    if start + nbytes > len(mapped):
        raise Corrupt(f"storage {what} runs past the end of the file (truncated?)")
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(mapped, dtype=np.uint8, count=nbytes, offset=start)


def read_legacy(
    path: Path, storages: dict[str, StorageRef]
) -> tuple[Any, dict[str, np.ndarray], str]:
    """The object and the storages of a legacy file: pickles, then each storage's bytes."""
    with open(path, "rb") as stream:
        header = [unpickle(stream, {}) for _ in range(LEGACY_HEADER_PICKLES)]
        if header[1] != LEGACY_PROTOCOL_VERSION:
            raise Refused(f"legacy protocol version {str(header[1])[:20]}")
        tree = unpickle(stream, storages)
        keys = unpickle(stream, {})
        if not isinstance(keys, list) or any(key not in storages for key in keys):
            raise Corrupt("the list of storages does not match the pickle")
        offset = stream.tell()
        mapped = map_file(stream)
    buffers = {}
    for key in keys:
        if offset + LEGACY_NUMEL.size > len(mapped):
            raise Corrupt(f"storage {key} runs past the end of the file (truncated?)")
        (numel,) = LEGACY_NUMEL.unpack_from(mapped, offset)
        if numel != storages[key].numel:
            raise Corrupt(f"storage {key} holds {numel} elements, the pickle says otherwise")
        nbytes = storage_bytes(storages[key])
        buffers[key] = mapped_bytes(mapped, offset + LEGACY_NUMEL.size, nbytes, key)
        offset += LEGACY_NUMEL.size + nbytes
    # torch writes legacy storages little-endian whatever the machine.
    return tree, buffers, "little"


def storage_bytes(ref: StorageRef) -> int:
    """How many bytes a storage holds: its element count times its element size."""
    return ref.numel * NUMPY_DTYPES[ref.dtype].itemsize


def resolve(value: Any, buffers: dict[str, np.ndarray], swap: bool) -> Any:
    """`value` with each TensorRecord replaced by its array; containers rebuilt as dict/list."""
    if isinstance(value, TensorRecord):
        return materialize(value, buffers[value.storage.key], swap)
    if isinstance(value, StorageRef):  # torch compares a bare storage by identity, not content
        raise Refused("a storage outside a tensor")
    if isinstance(value, dict):
        return {key: resolve(child, buffers, swap) for key, child in value.items()}
    if isinstance(value, list) or (isinstance(value, tuple) and not isinstance(value, Size)):
        children = [resolve(child, buffers, swap) for child in value]
        return children if isinstance(value, list) else tuple(children)
    return value


def materialize(record: TensorRecord, storage: np.ndarray, swap: bool) -> np.ndarray:
    """The tensor's elements, cut out of its storage by offset, shape and strides.

    Copied when the cut is not contiguous or the bytes need swapping; a contiguous tensor stays
    a read-only view of the mapped file, so a large checkpoint is not held in memory twice.
    """
    dtype = NUMPY_DTYPES.get(record.dtype)
    if dtype is None:
        raise Refused(f"tensors of dtype {record.dtype or 'unknown'}")
    if math.prod(record.shape) == 0:
        return np.zeros(record.shape, dtype=dtype)
    count = storage.size // dtype.itemsize
    reach = zip(record.shape, record.stride, strict=True)
    last = record.offset + sum((size - 1) * step for size, step in reach)
    if last >= count:
        raise Corrupt("a tensor reaches past the end of its storage")
    # Cut as opaque items: as_strided goes through the array interface, which cannot carry
    # ml_dtypes' types; the items take their dtype once contiguous.
    items = storage[: count * dtype.itemsize].view(np.dtype((np.void, dtype.itemsize)))
    strides = tuple(step * dtype.itemsize for step in record.stride)
    cut = as_strided(items[record.offset :], record.shape, strides, writeable=False)
    array = (cut if cut.flags.c_contiguous else cut.copy()).view(dtype)
    if swap:
        unit = np.dtype(f"u{byteswap_unit(dtype)}")
        array = array.reshape(-1).view(unit).byteswap().view(dtype).reshape(record.shape)
    with np.errstate(all="ignore"):
        if record.neg:
            array = np.negative(array)
        if record.conj:
            array = np.conj(array)
    return array
