"""A meta-path hook that calls back once a watched top-level module has been imported."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class ImportWatcher(importlib.abc.MetaPathFinder):
    """Calls back right after a watched top-level module has been executed for the first time."""

    def __init__(self, callbacks: dict[str, Callable[[ModuleType], None]]) -> None:
        self._callbacks = callbacks
        self._searching: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        callback = self._callbacks.get(name)
        if callback is None or name in self._searching:
            return None
        self._searching.add(name)
        try:
            spec = self._find_with_others(name, path, target)
        finally:
            self._searching.discard(name)
        loader = getattr(spec, "loader", None)
        if loader is None:
            return spec
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                original_exec(module)
            finally:
                vars(loader).pop("exec_module", None)
            if self._callbacks.pop(name, None) is not None:
                callback(module)
            if not self._callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            return spec  # an unusual loader: the callback runs at the next opportunity instead
        return spec

    def _find_with_others(self, name: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return spec
        return None


def import_optional(name: str, what: str, on_error: Callable[[str], None]) -> ModuleType | None:
    """Module `name`, or None when it is missing or fails to import (reported as `what`)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    except Exception as error:
        on_error(f"importing {what}: {error!r}")
        return None
