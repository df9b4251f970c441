"""The layout stays what docs/architecture.md says: layers without cycles, small modules."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import repro_gate

PACKAGE = Path(repro_gate.__file__).parent
MAX_MODULE_LINES = 400


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


def test_packages_import_each_other_without_cycles() -> None:
    edges = package_imports()

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for nxt in edges.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    assert edges["cli"] >= {"gate", "config"}, "the check is looking at the wrong tree"
    cycles = sorted(name for name in edges if name in reachable(name))
    assert cycles == []


def test_lower_layers_never_import_the_layers_above() -> None:
    edges = package_imports()
    for lower in ("config", "manifest", "errors", "validation", "compare", "launch", "render"):
        assert not edges.get(lower, set()) & {"cli", "gate", "publish"}, lower


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
