"""Checkpoint writes the training makes, seen by wrapping the functions that write them.

Only run R's first process watches (REPRO_GATE_RESUME_AFTER): nothing here is installed
otherwise. Watched: `torch.save` (to a path, or to a file object with a name),
`safetensors.torch.save_file` and `save_model` (once the training imports safetensors),
`torch.distributed.checkpoint.save` and `save_state_dict` (the checkpoint's directory), and a
rename of a path so written: a write to a temporary path then `os.replace` or `os.rename` to
the final name (what `Path.replace`, `Path.rename` and `shutil.move` call) reports the final path,
as does the rename of a directory holding such a write. Each wrapper calls the original with the
same arguments and returns what it returned; the write is reported after it succeeded. A rename
of a path no checkpoint was written to (the probe's own files, say) is not a checkpoint.

Standard library only; torch and the other modules are handed in once the training imported them.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from _repro_gate_import_watch import ImportWatcher

# (kind, path): one file or directory of a checkpoint was written
OnWrite = Callable[[str, str], None]
# (old path, new path): a path that was reported was renamed
OnRename = Callable[[str, str], None]
SAFETENSORS = "safetensors.torch"
DCP = "torch.distributed.checkpoint"


class CheckpointWatch:
    """Wraps the writing functions; reports each write and each rename of a written path."""

    def __init__(self, on_write: OnWrite, on_rename: OnRename,
                 on_error: Callable[[str], None]) -> None:
        self._on_write = on_write
        self._on_rename = on_rename
        self._on_error = on_error
        self.written: set[str] = set()  # absolute paths reported, and renamed to

    def install(self, torch: Any) -> None:
        """Wrap torch.save and os.replace/os.rename now; safetensors and torch's distributed
        checkpoint now if imported, else when the training imports them."""
        wrapped_save = self._wrapped(torch.save, "torch.save", _torch_save_path)
        torch.save = wrapped_save
        if getattr(torch, "serialization", None) is not None:
            torch.serialization.save = wrapped_save
        for name in ("replace", "rename"):
            setattr(os, name, self._wrapped_rename(getattr(os, name)))
        later: dict[str, Callable[[ModuleType], None]] = {}
        for name, install in ((SAFETENSORS, self._install_safetensors), (DCP, self._install_dcp)):
            if name in sys.modules:
                install(sys.modules[name])
            else:
                later[name] = install
        if later:
            sys.meta_path.insert(0, ImportWatcher(later))

    def _install_safetensors(self, module: Any) -> None:
        for name, path_of in (("save_file", _second_argument("filename")),
                              ("save_model", _second_argument("filename"))):
            if callable(getattr(module, name, None)):
                setattr(module, name, self._wrapped(getattr(module, name), "safetensors",
                                                    path_of))

    def _install_dcp(self, module: Any) -> None:
        for name in ("save", "save_state_dict"):
            if callable(getattr(module, name, None)):
                setattr(module, name, self._wrapped(getattr(module, name), "dcp", _dcp_path))

    def _wrapped(self, original: Callable[..., Any], kind: str,
                 path_of: Callable[[tuple[Any, ...], dict[str, Any]], Any]) -> Any:
        @functools.wraps(original)
        def write(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                path = _absolute(path_of(args, kwargs))
                if path is not None:
                    self.written.add(path)
                    self._on_write(kind, path)
            except Exception as error:
                self._on_error(f"noting a checkpoint write ({kind}): {error!r}")
            return result

        return write

    def _wrapped_rename(self, original: Callable[..., Any]) -> Any:
        @functools.wraps(original)
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(src, dst, *args, **kwargs)
            if self.written:
                try:
                    self._renamed(_absolute(src), _absolute(dst))
                except Exception as error:
                    self._on_error(f"noting a checkpoint rename: {error!r}")
            return result

        return rename

    def _renamed(self, src: str | None, dst: str | None) -> None:
        if src is None or dst is None:
            return
        inside = src + os.sep
        if src in self.written or any(path.startswith(inside) for path in self.written):
            self.written.add(dst)
            self._on_rename(src, dst)


def _torch_save_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    target = args[1] if len(args) > 1 else kwargs.get("f")
    if isinstance(target, (str, bytes, os.PathLike)):
        return target
    return getattr(target, "name", None)  # an open file: its name, if it has a path


def _second_argument(keyword: str) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    def path_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args[1] if len(args) > 1 else kwargs.get(keyword)

    return path_of


def _dcp_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    checkpoint_id = kwargs.get("checkpoint_id")
    if checkpoint_id is not None:
        return checkpoint_id
    writer = kwargs.get("storage_writer") or (args[1] if len(args) > 1 else None)
    return getattr(writer, "path", None)


def _absolute(path: Any) -> str | None:
    """The absolute, normalised form of a path given as str, bytes or PathLike; else None."""
    if isinstance(path, int) or path is None:
        return None  # a file descriptor, or nothing
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return None
    return os.path.abspath(text)
