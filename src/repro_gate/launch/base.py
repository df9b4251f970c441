"""What every launcher receives and returns."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

Mode = Literal["deterministic", "default", "cost"]


@dataclass(frozen=True)
class PythonEnvironment:
    """A virtual environment the run's commands find first on PATH (`repro-gate upgrade`)."""

    root: Path  # the environment's directory, as the run sees it
    volume: str | None = None  # Docker: the named volume holding it, mounted read-only at `root`

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"


@dataclass(frozen=True)
class Isolation:
    """A local run in its own namespaces (launch/namespaces.py), where it sees the workspace at
    its own path through an overlay: what it writes goes to `upper`, the user's files stay."""

    upper: Path  # the overlay's upper layer: exactly what the run wrote (<run_dir>/work)
    scratch: Path  # overlayfs's work folder: empty, on the upper layer's filesystem
    # The folder the overlay reads the workspace from when it is not the workspace itself (run
    # V-fileordering: the workspace listed in another order, launch/listing.py).
    lower: Path | None = None


@dataclass
class RunSpec:
    """One training run to start."""

    name: str  # "A", "B", ... for deterministic runs, "default" for the cost run
    mode: Mode
    argv: list[str]
    workdir: Path  # where the run starts: the gate's runs get their own copy (gate.workcopy)
    run_dir: Path  # fresh, writable; exported as REPRO_GATE_RUN_DIR
    env: dict[str, str]  # variables the gate adds, none holding a path (mode, seed, user `env`…)
    timeout: float | None
    log_path: Path
    # Directories put first on PYTHONPATH, in order: the probe's `inject/` (sitecustomize.py), and
    # for the embedded reference training its `reference/` directory. Read-only for the run.
    python_path: list[Path]
    # Run inside this environment instead of the gate's own interpreter's (`repro-gate upgrade`).
    python_environment: PythonEnvironment | None = None
    # The user's working directory when `workdir` is the run's own copy of it (the gate's runs):
    # never written by the run; a container sees the copy at the workspace's path.
    workspace: Path | None = None
    # Set when the run sees `workspace` through an overlay (then `workdir` is `workspace`).
    isolation: Isolation | None = None
    # The gate's folders the run must not see (every output folder, the lock folder): hidden
    # under an empty tmpfs, locally and in a container; the run's own folder and working copy
    # are shown inside them.
    hidden: tuple[Path, ...] = ()
    # Set by the gate while the run lasts to end it at once (fail-fast: run B's first step that
    # differs from run A's, seen in its trajectory file); the launcher stops it as on a timeout.
    stop: threading.Event = field(default_factory=threading.Event)
    # Paths of the workspace (virtualenvs, `data:`) the run's copy holds as empty mount points,
    # where a launcher that binds (a container) shows the workspace's own, read-only.
    shared: tuple[Path, ...] = ()
    # One factor of the environment changed for the run (gate/vary_runs.py); None: as runs A
    # and B have it. `workspace_at`: where the run sees its working copy instead of the
    # workspace's own path (which stays, read-only); `hostname`: the run's host name;
    # `preload`: a library its dynamic loader loads before any the environment names.
    workspace_at: Path | None = None
    hostname: str | None = None
    preload: str | None = None


@dataclass
class RunOutcome:
    """How a run ended, as the launcher saw it."""

    exit_code: int | None  # None when it never started or was killed before exiting
    wall_seconds: float
    timed_out: bool = False
    details: dict[str, object] = field(default_factory=dict)  # launcher specifics (container id…)


LineSink = Callable[[str], None]


class Launcher(Protocol):
    """Starts a run, streams its output line by line to `sink`, waits for it to end."""

    @property
    def name(self) -> str:
        """`local`, `docker`: which launcher ran the run (recorded in the manifest)."""
        ...

    def python_executable(self) -> str:
        """The interpreter that runs the embedded reference training under this launcher."""
        ...

    def isolates(self, output_dir: Path) -> bool:
        """Whether runs writing under `output_dir` get their own namespaces and see the
        workspace through an overlay (`RunSpec.isolation`); else they get a copy of it."""
        ...

    def shares_by_binding(self) -> bool:
        """Whether a run's working copy holds empty mount points where the workspace's
        virtualenvs and `data:` paths are, for the launcher to bind the workspace's own there
        (a container sees its copy at the workspace's path, where a link would name itself),
        rather than links to them."""
        ...

    def find_file(self, candidates: tuple[str, ...]) -> str | None:
        """The first of `candidates` (absolute paths) that exists where the runs run: this
        machine, or the image."""
        ...

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        """Run to the end (or the timeout, or `spec.stop`); sets REPRO_GATE_RUN_DIR and
        PYTHONPATH to the paths the run sees."""
        ...
