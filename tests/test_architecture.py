"""The layout stays what docs/architecture.md says: layers without cycles, small modules."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import repro_gate

PACKAGE = Path(repro_gate.__file__).parent
MAX_MODULE_LINES = 400
ARCHITECTURE_DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
ROOT = {"__init__", "__main__", "__version__"}  # the package's own root: its version, `-m`


def modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def top_level(module: str) -> str:
    """`repro_gate.gate.pipeline` -> `gate`; names imported from the package root count as such."""
    return module.split(".")[1] if "." in module else module


def package_imports() -> dict[str, set[str]]:
    """Which top-level packages each top-level package imports (the probe is left out)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in modules():
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[:2] == ("probe", "inject"):
            continue
        source = parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] if node.module != "repro_gate" else [
                    f"repro_gate.{alias.name}" for alias in node.names]
                for target in targets:
                    if target.startswith("repro_gate.") and top_level(target) != source:
                        edges[source].add(top_level(target))
    return edges


def documented_floors() -> dict[str, int]:
    """docs/architecture.md's layer table: each package (or root module) -> its floor (1 = top)."""
    floors: dict[str, int] = {}
    for line in ARCHITECTURE_DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        for name in re.findall(r"`([\w.]+)/?`", cells[1]):
            assert name not in floors, f"{name} is listed twice in {ARCHITECTURE_DOC.name}"
            floors[name.removesuffix(".py")] = int(cells[0])
    return floors


def top_level_names() -> set[str]:
    """The package's folders and root modules, less its own root (`__init__`, `__main__`)."""
    names = {path.relative_to(PACKAGE).parts[0] for path in modules()}
    return {name.removesuffix(".py") for name in names} - ROOT


def test_the_doc_lists_every_package_once() -> None:
    floors = documented_floors()
    assert set(floors) - {"schemas"} == top_level_names()


def test_every_import_goes_down_the_documented_floors() -> None:
    floors = documented_floors()
    edges = package_imports()
    assert edges["cli"] >= {"gate", "config"}, "the check is looking at the wrong tree"
    upward = sorted(f"{source} (floor {floors[source]}) imports {target} (floor {floors[target]})"
                    for source, targets in edges.items() if source not in ROOT
                    for target in targets - ROOT if floors[target] <= floors[source])
    assert upward == []


def test_features_sit_above_the_gate_and_what_they_share_below_it() -> None:
    floors = documented_floors()
    assert floors["upgrade"] < floors["gate"] < floors["environments"] < floors["launch"]
    assert floors["gate"] < floors["cost"]


def module_imports() -> dict[str, set[str]]:
    """Which modules each module imports, wherever the import statement is."""
    names = {module_name(path): path for path in modules()
             if path.relative_to(PACKAGE).parts[:2] != ("probe", "inject")}
    edges: dict[str, set[str]] = {}
    for name, path in names.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in names
                            else node.module for alias in node.names}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        edges[name] = {target for target in targets if target in names and target != name}
    return edges


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("repro_gate", *parts)).removesuffix(".__init__")


def test_modules_import_each_other_without_cycles() -> None:
    edges = module_imports()
    assert "repro_gate.gate.pipeline" in edges["repro_gate.upgrade.check"]
    cycles = []
    for start in edges:
        seen: set[str] = set()
        stack = list(edges[start])
        while stack:
            current = stack.pop()
            if current == start:
                cycles.append(start)
                break
            if current not in seen:
                seen.add(current)
                stack.extend(edges[current])
    assert cycles == []


def test_no_module_is_over_400_lines() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
             for path in modules()}
    assert {name: size for name, size in sizes.items() if size > MAX_MODULE_LINES} == {}


def test_no_module_and_package_share_a_name_at_one_level() -> None:
    twins = []
    for directory in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        files = {p.stem for p in directory.glob("*.py")}
        folders = {p.name for p in directory.iterdir() if p.is_dir()}
        twins += [str(directory / name) for name in files & folders]
    assert twins == []
