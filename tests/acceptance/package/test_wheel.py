"""The package users install: the wheel built from this tree carries the command, its schemas
and the embedded reference, installs into a clean virtualenv, and `repro-gate --version` runs.

Cheap on purpose: the wheel only (the release builds the sdist too), built without build
isolation (hatchling comes from the test extra, no index is reached), installed with
`--no-deps`. The clean environment sees the test environment's dependencies through a `.pth`
line appended after its own site-packages, so the package itself can only come from the wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from helpers.paths import ROOT

from repro_gate import __version__

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def run(*argv: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH: a source tree on it would be imported instead of the installed wheel.
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    completed = subprocess.run([str(arg) for arg in argv], cwd=cwd, env=environ,
                               capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "--quiet", "--wheel-dir", folder, ROOT)
    [built] = folder.glob("repro_gate-*.whl")
    return built


def test_the_wheel_carries_the_command_its_schemas_and_the_reference(wheel: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"repro_gate-{version}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()

    assert (metadata["Name"], metadata["Version"]) == ("repro-gate", version)
    assert version == __version__
    assert "cryptography>=42; extra == 'attest'" in metadata.get_all("Requires-Dist")
    assert "repro-gate = repro_gate.cli.main:main" in entry_points
    shipped = {path.relative_to(ROOT / "src").as_posix()
               for path in (ROOT / "src" / "repro_gate" / "schemas").glob("*.schema.json")}
    assert shipped <= names
    assert "repro_gate/reference/repro_gate_reference.py" in names
    assert not any(name.startswith("tests/") for name in names)


def test_the_wheel_installs_in_a_clean_venv_and_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
                .stdout.strip())
    (site / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    version = run(venv / "bin" / "repro-gate", "--version", cwd=tmp_path)
    where = run(python, "-c", "import repro_gate; print(repro_gate.__file__)", cwd=tmp_path)

    assert version.stdout == f"repro-gate {__version__}\n"
    assert Path(where.stdout.strip()).is_relative_to(site)
