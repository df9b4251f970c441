"""The injected probe stays inside its boundary: stdlib, torch and numpy, its own modules only.

It runs in the user's training process and image, where repro_gate is not installed, so it never
imports repro_gate; its modules are named `_repro_gate_*` so none can shadow one of the user's.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from repro_gate.probe import INJECT_DIR

ALLOWED_THIRD_PARTY = {"torch", "numpy"}
PROBE_FILES = sorted(INJECT_DIR.glob("*.py"))
SIBLINGS = {path.stem for path in PROBE_FILES}


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in a file: statements anywhere, relative ones as `.x`,
    and `importlib.import_module("...")` / `__import__("...")` calls with a literal name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, "." * node.level + (node.module or "")
        elif isinstance(node, ast.Call) and (name := _dynamic_import_name(node)) is not None:
            yield node.lineno, name


def _dynamic_import_name(call: ast.Call) -> str | None:
    """X of `importlib.import_module("X")`, `import_module("X")` or `__import__("X")`."""
    func = call.func
    dynamic = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    if dynamic and call.args and isinstance(call.args[0], ast.Constant):
        return str(call.args[0].value)
    return None


def test_the_probe_has_its_modules() -> None:
    assert {"sitecustomize", "_repro_gate_probe", "_repro_gate_contract"} <= SIBLINGS


@pytest.mark.parametrize("path", PROBE_FILES, ids=lambda p: p.name)
def test_probe_modules_are_named_so_they_cannot_clash(path: Path) -> None:
    assert path.stem == "sitecustomize" or path.stem.startswith("_repro_gate_")


@pytest.mark.parametrize("path", PROBE_FILES, ids=lambda p: p.name)
def test_probe_never_imports_repro_gate(path: Path) -> None:
    found = [
        f"{path.name}:{line} imports {module}"
        for line, module in imported_modules(path)
        if module.split(".")[0] == "repro_gate"
    ]
    assert found == []


@pytest.mark.parametrize("path", PROBE_FILES, ids=lambda p: p.name)
def test_probe_imports_only_stdlib_torch_numpy_and_its_siblings(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | ALLOWED_THIRD_PARTY | SIBLINGS
    found = [
        f"{path.name}:{line} imports {module}"
        for line, module in imported_modules(path)
        if module.split(".")[0] not in allowed  # a relative import (".x") is never allowed
    ]
    assert found == []


def test_the_import_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os.path\n"
        "from . import x\n"
        "def f():\n"
        "    from repro_gate.probe import ENV_RUN_DIR\n"
        "    importlib.import_module('yaml')\n",
        encoding="utf-8",
    )
    assert {module for _, module in imported_modules(sample)} == {
        "os.path",
        ".",
        "repro_gate.probe",
        "yaml",
    }
