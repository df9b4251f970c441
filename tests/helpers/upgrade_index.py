"""A local package index and projects locked against it, for the upgrade check's tests
(the fixtures are in upgrade_fixtures.py).

The index is a `--find-links` directory of real wheels, built by `uv build` (uv's own build
backend, offline) from source trees generated here, in two versions each:

    numlib    1.0 -> 1.1  changes SCALE, a number a training multiplies by
    harmless  1.0 -> 1.1  changes nothing a training sees; 1.1 needs leaf>=1.1
    leaf      1.0 -> 1.1  a transitive dependency (of harmless only)
    noisy     1.0 -> 1.1  1.1 makes jitter() random: a training that uses it is not reproducible
    winonly   1.0         Windows only (`; sys_platform == 'win32'`): never installed here

The projects are locked while the index holds the 1.0 wheels only; then the 1.1 wheels are
"published" into the same directory, so every baseline is at 1.0 and every upgrade finds 1.1
(the locks record the index's path, so it must stay the same). Nothing reaches the network:
uv runs with `--no-index --find-links <index>`, offline, with its own cache for the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from repro_gate.environments.installer import uv_binary

# name -> version -> (dependencies, the module's source)
PACKAGES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "numlib": {"1.0": ((), "SCALE = 0.5\n"), "1.1": ((), "SCALE = 0.5000001\n")},
    "harmless": {"1.0": (("leaf>=1.0",), "def identity(x):\n    return x\n"),
                 "1.1": (("leaf>=1.1",), "def identity(x):\n    return x\n")},
    "leaf": {"1.0": ((), "LEAF = True\n"), "1.1": ((), "LEAF = True\n")},
    "noisy": {"1.0": ((), "def jitter():\n    return 0.0\n"),
              "1.1": ((), "import os\n\n\ndef jitter():\n"
                          "    return int.from_bytes(os.urandom(2), 'little') * 1e-9\n")},
    "winonly": {"1.0": ((), "")},
}
BASELINE_VERSION = "1.0"
TRAINER_DEPENDENCIES = ("numlib>=1.0", "harmless>=1.0", "winonly; sys_platform == 'win32'")


@dataclass(frozen=True)
class PackageIndex:
    """The local index, and the uv flags that make it the only source of packages."""

    path: Path

    @property
    def args(self) -> tuple[str, ...]:
        """Flags for `uv lock`, `uv pip compile`, `uv pip install` and pip alike."""
        return ("--no-index", "--find-links", str(self.path))


@dataclass(frozen=True)
class Templates:
    """Projects locked at 1.0, copied by `make_project`."""

    root: Path

    def copy(self, name: str, destination: Path) -> Path:
        target = destination / name
        shutil.copytree(self.root / name, target)
        return target


def uv() -> str:
    found = uv_binary()
    assert found is not None, "uv is a dependency of repro-gate: pip install uv"
    return str(found)


def run_uv(*args: str, cwd: Path) -> None:
    completed = subprocess.run([uv(), *args], cwd=cwd, capture_output=True, text=True,
                               check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr


def build_wheel(name: str, version: str, source_root: Path, wheels: Path) -> None:
    dependencies, module = PACKAGES[name][version]
    tree = source_root / f"{name}-{version}"
    (tree / "src" / name).mkdir(parents=True)
    (tree / "src" / name / "__init__.py").write_text(module)
    quoted = ", ".join(f'"{dependency}"' for dependency in dependencies)
    (tree / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.10"\n'
        f"dependencies = [{quoted}]\n\n[build-system]\n"
        'requires = ["uv_build>=0.8,<1"]\nbuild-backend = "uv_build"\n'
    )
    run_uv("build", "--wheel", "--quiet", "--out-dir", str(wheels), str(tree), cwd=source_root)


def write_trainer(project: Path, dependencies: tuple[str, ...] = TRAINER_DEPENDENCIES) -> None:
    """The pyproject.toml of a project called `trainer`, with no build system (uv: virtual)."""
    quoted = ", ".join(f'"{dependency}"' for dependency in dependencies)
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "trainer"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        f"dependencies = [{quoted}]\n"
    )


def lock_templates(root: Path, index: PackageIndex) -> None:
    """The projects, locked against the index at its 1.0 state."""
    write_trainer(root / "uv-project")
    run_uv("lock", *index.args, cwd=root / "uv-project")
    write_trainer(root / "uv-noisy", ("numlib>=1.0", "harmless>=1.0", "noisy>=1.0"))
    run_uv("lock", *index.args, cwd=root / "uv-noisy")

    annotated = root / "requirements-in"  # requirements.in -> hash-pinned, annotated lock
    annotated.mkdir()
    (annotated / "requirements.in").write_text("numlib\nharmless\n")
    run_uv("pip", "compile", "requirements.in", "-o", "requirements.txt", "--generate-hashes",
           *index.args, cwd=annotated)

    from_pyproject = root / "requirements-pyproject"
    write_trainer(from_pyproject, ("numlib>=1.0", "harmless>=1.0"))
    run_uv("pip", "compile", "pyproject.toml", "-o", "requirements.txt", *index.args,
           cwd=from_pyproject)

    bare = root / "requirements-bare"  # hand-written pins: no source, no annotations
    bare.mkdir()
    (bare / "requirements.txt").write_text("numlib==1.0\nharmless==1.0\nleaf==1.0\n")




def tree_digest(root: Path, leave_out: Path | None = None) -> dict[str, bytes]:
    """Every file under `root` (but not under `leave_out`) with its bytes: the user's project,
    before and after."""
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and (leave_out is None or leave_out not in path.parents)}


def env_python_value(python: Path, expression: str, *imports: str) -> str:
    """`expression` evaluated by an environment's interpreter (what a training would see)."""
    code = "".join(f"import {name}\n" for name in imports) + f"print({expression})"
    completed = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                               check=False, timeout=60, env={**os.environ, "PYTHONPATH": ""})
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()
