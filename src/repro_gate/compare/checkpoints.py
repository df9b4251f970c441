"""Reading checkpoints safely: torch.save files and safetensors, with or without torch.

Training code is untrusted, so nothing here ever runs a full unpickler. torch.save files are
read by the restricted reader (`torch_reader`), which builds nothing but tensors and plain
values; a file it refuses is loaded with `torch.load(weights_only=True)` when torch is
installed, and otherwise (or when that refuses too) compared by bytes, with the reason.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from repro_gate.compare.safetensors_file import read_safetensors
from repro_gate.compare.structured import ROOT
from repro_gate.compare.torch_pickle import Corrupt, Refused, Size
from repro_gate.compare.torch_reader import data_pickle_name, read_torch_save
from repro_gate.errors import ErrorKind, GateError, one_line

# The first pickle of a legacy (pre-zip) torch.save file holds this number.
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
# Legacy files hold four pickles before the storages: magic, protocol, sys info, the object.
LEGACY_PICKLES = 4
LEGACY_HEAD_BYTES = 64
# Text-protocol opcodes read up to a newline; a corrupt file may have none.
MAX_PICKLE_LINE_BYTES = 16 * 1024 * 1024

HOW_TO_GET_TENSORS = (
    "for tensor-level results save plain tensors (torch.save(model.state_dict(), ...)) "
    "or use safetensors"
)


@dataclass
class Checkpoint:
    """The leaves of a checkpoint in file order: tensors, and other values (lr, step, ...)."""

    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


class NotComparable(Exception):
    """The file cannot be compared tensor by tensor (but is not corrupt); the message says why.

    Caught by `compare.artifacts`, which then compares the file by bytes: never seen by a user.
    """


def load_torch(path: Path, rel_path: str, run: str) -> Checkpoint:
    """Read a torch.save file and flatten it to dotted names.

    Raises NotComparable when the file is no torch.save file (`.bin` only) or holds objects
    that neither reader builds; GateError(CHECKPOINT_UNREADABLE) when it is corrupt.
    """
    layout = torch_save_layout(path)
    if layout is None:
        if path.suffix.lower() == ".bin":
            raise NotComparable(f"run {run}'s file is not a PyTorch checkpoint; compared by bytes")
        raise unreadable(rel_path, run, "not a torch.save file (no zip archive, no legacy pickle)")
    if layout == "zip" and zip_holds_pickle(path) is None:
        # torch would say `[Errno 22] Invalid argument` or "failed finding central directory".
        raise unreadable(rel_path, run, "not a complete torch checkpoint (truncated zip?)")
    try:
        tree = read_torch_save(path, layout)
    except Corrupt as error:
        raise unreadable(rel_path, run, str(error)) from error
    except Refused as refusal:
        problem = object_pickle_problem(path, layout)
        if problem is not None:
            raise unreadable(rel_path, run, f"corrupt pickle data ({problem})") from refusal
        tree = load_with_torch(path, layout, rel_path, run, refusal)
    try:
        return flattened(tree)
    except RecursionError as error:
        message = f"run {run}'s file nests containers too deeply; compared by bytes"
        raise NotComparable(message) from error


def load_with_torch(path: Path, layout: str, rel_path: str, run: str, refusal: Refused) -> Any:
    """The file through `torch.load(weights_only=True)`, after the restricted reader refused it."""
    try:
        from repro_gate.compare import torch_fallback
    except ModuleNotFoundError as error:
        if error.name != "torch":
            raise
        raise NotComparable(
            f"the checkpoint reader refused run {run}'s file (it holds {refusal}), so it was "
            f"compared by bytes and never unpickled (torch is not installed, so "
            f"torch.load(weights_only=True) was not tried); "
            f"{HOW_TO_GET_TENSORS}"
        ) from refusal
    try:
        return torch_fallback.to_numpy_tree(torch_fallback.torch_load(path, layout))
    except Refused as late:
        raise NotComparable(f"run {run}'s file holds {late}; compared by bytes") from late
    except pickle.UnpicklingError as error:
        refused = re.search(r"GLOBAL ([\w.]+)", str(error))
        holding = f" (it holds {refused.group(1)})" if refused else ""
        raise NotComparable(
            f"torch.load(weights_only=True) refused run {run}'s file{holding}, so it was compared "
            f"by bytes and never unpickled; {HOW_TO_GET_TENSORS}"
        ) from error
    except Exception as error:
        raise unreadable(rel_path, run, reason(error)) from error


def flattened(tree: Any) -> Checkpoint:
    """The checkpoint's leaves under dotted names: arrays are tensors, the rest values."""
    checkpoint = Checkpoint()
    for name, leaf in flatten(tree):
        bucket = checkpoint.tensors if isinstance(leaf, np.ndarray) else checkpoint.values
        bucket[unique_name(name, checkpoint)] = leaf
    return checkpoint


def load_safetensors(path: Path, rel_path: str, run: str) -> Checkpoint:
    """Load a safetensors file (tensors in header order, metadata as `__metadata__.<key>`)."""
    try:
        tensors, metadata = read_safetensors(path)
    except Refused as refusal:
        raise NotComparable(f"run {run}'s file holds {refusal}; compared by bytes") from refusal
    except Exception as error:
        raise unreadable(rel_path, run, reason(error)) from error
    values = {f"__metadata__.{key}": value for key, value in metadata.items()}
    return Checkpoint(tensors=tensors, values=values)


def unreadable(rel_path: str, run: str, reason: str) -> GateError:
    """The error for a checkpoint that cannot be read at all."""
    return GateError(
        f"cannot read checkpoint {rel_path} from run {run}: {reason}",
        kind=ErrorKind.CHECKPOINT_UNREADABLE,
    )


def torch_save_layout(path: Path) -> str | None:
    """`zip` or `legacy` for a torch.save file, None for anything else. Nothing is unpickled."""
    with open(path, "rb") as stream:
        if stream.read(4) == b"PK\x03\x04":
            return "zip" if zip_holds_pickle(path) is not False else None
        stream.seek(0)
        # The magic-number pickle is a few dozen bytes; never parse further into the file.
        head = stream.read(LEGACY_HEAD_BYTES)
    try:
        first = [(op.name, arg) for op, arg, _ in pickletools.genops(io.BytesIO(head))]
    except ValueError:
        return None
    numbers = [arg for name, arg in first if name not in ("PROTO", "FRAME", "STOP")]
    return "legacy" if numbers == [LEGACY_MAGIC_NUMBER] else None


def zip_holds_pickle(path: Path) -> bool | None:
    """Whether a zip archive has a torch `data.pkl`; None when the zip itself is unreadable."""
    try:
        with zipfile.ZipFile(path) as archive:
            return data_pickle_name(archive) is not None
    except (zipfile.BadZipFile, OSError):
        return None


def object_pickle_problem(path: Path, layout: str) -> str | None:
    """Why the pickle holding the saved object does not parse, or None when it does.

    Parsed statically, opcode by opcode, never executed: a well-formed pickle that
    `weights_only` refuses holds objects we must not build; a malformed one is corruption.
    """
    try:
        if layout == "zip":
            with zipfile.ZipFile(path) as archive:
                name = data_pickle_name(archive)
                if name is None:
                    return "no data.pkl in the archive"
                return parse_problem(io.BytesIO(archive.read(name)), count=1)
        with open(path, "rb") as stream:
            return parse_problem(BoundedReader(stream, path.stat().st_size), LEGACY_PICKLES)
    except (zipfile.BadZipFile, OSError) as error:
        return reason(error)


def parse_problem(stream: BinaryIO | BoundedReader, count: int) -> str | None:
    """Why `count` consecutive pickles cannot be read from `stream`, or None when they can."""
    try:
        for _ in range(count):
            # genops only reads, reads lines and tells: BoundedReader does all three.
            for _ in pickletools.genops(stream):  # type: ignore[arg-type]
                pass
    except (ValueError, EOFError) as error:
        return reason(error)
    return None


class BoundedReader:
    """A file wrapper for pickletools: a corrupt length field never asks for more than the file."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self.stream = stream
        self.size = size

    def read(self, count: int = -1) -> bytes:
        remaining = self.size - self.stream.tell()
        return self.stream.read(remaining if count < 0 else min(count, remaining))

    def readline(self) -> bytes:
        return self.stream.readline(min(self.size - self.stream.tell(), MAX_PICKLE_LINE_BYTES))

    def tell(self) -> int:
        return self.stream.tell()


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, leaf) pairs in the object's order: `optimizer.state.0.exp_avg`.

    Empty containers are leaves, so `{}` against `[]` or a missing section still shows.
    """
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from flatten(child, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (list, tuple)) and value and not isinstance(value, Size):
        for index, child in enumerate(value):
            yield from flatten(child, f"{prefix}.{index}" if prefix else str(index))
    else:
        yield prefix or ROOT, value


def unique_name(name: str, checkpoint: Checkpoint) -> str:
    """`name`, or `name#2`, ... when dotted names collide (a key that itself holds a dot)."""
    candidate, number = name, 1
    while candidate in checkpoint.tensors or candidate in checkpoint.values:
        number += 1
        candidate = f"{name}#{number}"
    return candidate


def reason(error: BaseException) -> str:
    """A short one-line reason from a loader's exception (first sentence of its first line)."""
    if isinstance(error, EOFError):
        return "unexpected end of file (truncated?)"
    return one_line(error, 200).split(". ")[0]
