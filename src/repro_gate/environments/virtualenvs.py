"""Isolated virtual environments built from a set of pins, cached and reused.

The pins come from a lock (`Lock.pins()`), or from a lock with some packages moved to the
candidate's versions (upgrade's `apply_changes`, what the culprit search asks for). A pin set is
already resolved, so nothing is resolved again: `uv venv`, then `uv pip install --no-deps` of
the exact pins (`python -m venv` and pip when uv is missing). A mixture of two locks may be
inconsistent (`harmless 1.1` needs `leaf>=1.1`, the mixture pins `leaf 1.0`): every build ends
with a check, and an inconsistent set is a LOCK_UNRESOLVABLE GateError, which the search treats
as "skip". Installing can fail too (a version without a wheel for this platform): that is an
ENVIRONMENT GateError.

The cache: one directory per key, the sha256 of (interpreter, its version, the pins, the
inherit flag, and with it the inherited versions), under `cache_dir`. `env.json` is written
last, so a build that was interrupted is never reused: it is removed and built again. An
inconsistent set is recorded too, so asking again costs nothing. A lock file per key lets two
gates share the cache.

`inherit_site_packages`: the environment is created with `--system-site-packages` over the
base interpreter, and a `.pth` file adds the base's own site directories (when the gate runs
from a virtual environment, its packages are not the system's), after the environment's own:
the environment's pins win, the rest is the base's. A pin the base already meets by PEP 440
(`torch 2.13.0+cpu` meets `torch==2.13.0`) is not installed.

Docker mode: the environments must live inside the user's training image, since one built
in the gate's own container never reaches the training: `docker_volumes.DockerEnvironments`
is the same `BuildEnvironment` there, each environment a volume keyed by image and pins.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from repro_gate.environments.installer import failure_line, run_tool, tool_error, uv_binary
from repro_gate.environments.interpreter import Interpreter, already_met, inspect, unmet
from repro_gate.environments.package_sources import InstallGroup, PackageSources, option_lines
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.fingerprint.lockfiles import canonical_name

ENV_MARKER = "env.json"  # written last: its presence means the environment is complete
PINS_FILE = "repro-gate-pins.txt"  # the pins installed, as a requirements file
INHERIT_PTH = "_repro_gate_inherit.pth"
KEY_LENGTH = 32  # hex digits of the key in directory names


@dataclass(frozen=True)
class Environment:
    """A built environment: run the training with `python`."""

    python: Path
    lock_sha256: str  # sha256 of the pin set (`name==version` lines, sorted): its identity
    pins: dict[str, str]
    reused: bool  # found complete in the cache: nothing was built
    path: Path
    installed: tuple[str, ...] = ()  # pins installed in it; the others come from the base
    volume: str | None = None  # Docker: the named volume that holds it (None: on this host)


# The seam between the search and where environments live: pins in, environment out.
BuildEnvironment = Callable[[Mapping[str, str]], Environment]


@dataclass(frozen=True)
class _Marker:
    """`env.json`: what was built, and whether the pins turned out consistent."""

    key: str
    tool: str
    base_python: str
    pins: dict[str, str]
    installed: list[str] = field(default_factory=list)
    inherited: dict[str, str] = field(default_factory=dict)  # name -> the base's version
    problems: list[str] = field(default_factory=list)  # empty: consistent


@dataclass(frozen=True)
class LocalEnvironments:
    """Environments on this host: a `BuildEnvironment`."""

    cache_dir: Path
    inherit_site_packages: bool = False
    base_python: Path = Path(sys.executable)
    # where a pin of no known origin comes from: `--no-index --find-links DIR` (option lines)
    index_args: tuple[str, ...] = ()
    use_uv: bool = True  # False: python -m venv and pip even when uv is there
    sources: PackageSources = field(default_factory=PackageSources)  # the locks' origins

    def __call__(self, pins: Mapping[str, str]) -> Environment:
        """The environment of exactly `pins`, from the cache or built now."""
        pins = dict(sorted((canonical_name(name), version) for name, version in pins.items()))
        inherited = self._inherited(pins)
        key = self._key(pins, inherited)
        path = self.cache_dir.expanduser() / key[:KEY_LENGTH]
        path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(path.with_name(path.name + ".lock")):
            marker = _read_marker(path, key)
            reused = marker is not None
            if marker is None:
                marker = self._build(path, key, pins, inherited)
        if marker.problems:
            more = f" (and {len(marker.problems) - 1} more)" if len(marker.problems) > 1 else ""
            raise GateError(f"the pins do not resolve: {marker.problems[0]}{more}",
                            kind=ErrorKind.LOCK_UNRESOLVABLE, detail="\n".join(marker.problems))
        return Environment(_python(path), pins_sha256(pins), pins, reused, path,
                           tuple(marker.installed))

    def directory(self, pins: Mapping[str, str]) -> Path:
        """Where the environment of `pins` is, or is being, built (for progress lines)."""
        pins = dict(sorted((canonical_name(name), version) for name, version in pins.items()))
        return self.cache_dir.expanduser() / self._key(pins, self._inherited(pins))[:KEY_LENGTH]

    @cached_property
    def _base(self) -> Interpreter:
        return inspect(self.base_python)

    @cached_property
    def _uv(self) -> Path | None:
        return uv_binary() if self.use_uv else None

    def _inherited(self, pins: Mapping[str, str]) -> dict[str, str]:
        """The pins the base interpreter already meets: name -> its version."""
        return already_met(self._base, pins) if self.inherit_site_packages else {}

    def _key(self, pins: Mapping[str, str], inherited: Mapping[str, str]) -> str:
        installs = [group.masked_text() for group in self._groups(pins, inherited)]
        identity = {"python": self._base.executable, "version": self._base.version,
                    "pins": pins, "inherit": self.inherit_site_packages, "sources": installs,
                    "inherited": inherited,
                    "site": self._base.site_dirs if self.inherit_site_packages else []}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def _build(self, path: Path, key: str, pins: dict[str, str],
               inherited: dict[str, str]) -> _Marker:
        if path.exists():
            shutil.rmtree(path)  # no marker: a build that did not finish
        self._create(path)
        install = {name: version for name, version in pins.items() if name not in inherited}
        groups = self._groups(pins, inherited)
        (path / PINS_FILE).write_text("".join(group.masked_text() for group in groups))
        for number, group in enumerate(groups, start=1):
            self._install(path, group, number)
        marker = _Marker(key, "uv" if self._uv else "pip", self._base.executable, pins,
                         sorted(install), inherited, self._check(path, pins))
        _write_marker(path, marker)
        return marker

    def _create(self, path: Path) -> None:
        flag = ["--system-site-packages"] if self.inherit_site_packages else []
        argv: list[str | Path]
        if self._uv:
            argv = [self._uv, "venv", "--quiet", "--no-project", "--python", self.base_python,
                    *flag, path]
        else:
            argv = [self.base_python, "-m", "venv", *flag, path]
        self._run(argv, path.parent, f"cannot create the environment {path}")
        if self.inherit_site_packages:
            site = _site_packages(path)
            added = "; ".join(f"site.addsitedir({entry!r})" for entry in self._base.site_dirs)
            # `import` lines of a .pth file run at start-up; addsitedir also reads the base's
            # own .pth files (editable installs), which a plain path line would not.
            (site / INHERIT_PTH).write_text(f"import site; {added}\n" if added else "")

    def _groups(self, pins: Mapping[str, str], inherited: Mapping[str, str]
                ) -> list[InstallGroup]:
        """The installs of the pins the base does not meet, each from its own origin."""
        install = {name: version for name, version in pins.items() if name not in inherited}
        return self.sources.groups(install, option_lines(self.index_args))

    def _install(self, path: Path, group: InstallGroup, number: int) -> None:
        """One group, from a requirements file that holds its index options: uv and pip read
        `--index-url`, `--find-links` … there as pip defines them. That file has the index
        credentials, so it lives only while the tool runs."""
        group_file = path / f"repro-gate-install-{number}.txt"
        hashes = ["--require-hashes"] if group.require_hashes else []
        argv: list[str | Path]
        if self._uv:
            argv = [self._uv, "pip", "install", "--python", _python(path), "--no-deps",
                    *hashes, "-r", group_file]
        else:
            argv = [_python(path), "-m", "pip", "install", "--no-deps", *hashes,
                    "-r", group_file]
        descriptor = os.open(group_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(group.text())
        try:
            self._run(argv, path, f"cannot install the pins into {path}")
        finally:
            group_file.unlink(missing_ok=True)

    def _check(self, path: Path, pins: Mapping[str, str]) -> list[str]:
        """Why the installed set is inconsistent (empty: it is consistent)."""
        if self.inherit_site_packages:
            return unmet(inspect(_python(path)), pins)
        if self._uv:
            completed = run_tool([self._uv, "pip", "check", "--python", _python(path)], path)
            problems = [line.strip() for line in completed.stdout.splitlines()
                        if line.strip().startswith("The package")]
        else:
            completed = run_tool([_python(path), "-m", "pip", "check"], path)
            problems = [line.strip() for line in completed.stdout.splitlines() if line.strip()]
        if completed.returncode != 0 and not problems:
            problems = [failure_line(completed)]
        return problems if completed.returncode != 0 else []

    def _run(self, argv: list[str | Path], cwd: Path, what: str) -> None:
        try:
            completed = run_tool(argv, cwd)
        except OSError as error:
            raise GateError(f"{what}: {one_line(error)}", kind=ErrorKind.ENVIRONMENT) from None
        if completed.returncode != 0:
            raise tool_error(completed, what, ErrorKind.ENVIRONMENT)


def pins_sha256(pins: Mapping[str, str]) -> str:
    """The identity of a pin set: sha256 of its sorted `name==version` lines."""
    text = "".join(f"{canonical_name(n)}=={v}\n" for n, v in sorted(pins.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _python(path: Path) -> Path:
    return path / "bin" / "python"


def _site_packages(path: Path) -> Path:
    found = sorted(path.glob("lib/*/site-packages"))
    if not found:
        raise GateError(f"cannot create the environment {path}: it has no site-packages",
                        kind=ErrorKind.ENVIRONMENT)
    return found[0]


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One build of a key at a time, across processes; the kernel releases it with the fd."""
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _read_marker(path: Path, key: str) -> _Marker | None:
    """The marker of a complete environment of `key`, or None (absent, damaged, other key)."""
    try:
        marker = _Marker(**json.loads((path / ENV_MARKER).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return marker if marker.key == key and _python(path).exists() else None


def _write_marker(path: Path, marker: _Marker) -> None:
    """Atomically, so that a reader sees no marker or a whole one."""
    temporary = path / (ENV_MARKER + ".tmp")
    temporary.write_text(json.dumps(asdict(marker), indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path / ENV_MARKER)
