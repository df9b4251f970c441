"""Running in an environment: `InEnvironment`, a launcher whose runs find the environment's
interpreter first on PATH (the upgrade check's gates and trials run through it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from repro_gate.environments.virtualenvs import Environment
from repro_gate.launch.base import Launcher, LineSink, PythonEnvironment, RunOutcome, RunSpec


@dataclass(frozen=True)
class InEnvironment:
    """A launcher whose runs use `environment` (its `bin` first on PATH)."""

    inner: Launcher
    environment: PythonEnvironment

    @property
    def name(self) -> str:
        return self.inner.name

    def python_executable(self) -> str:
        return str(self.environment.python)

    def isolates(self, output_dir: Path) -> bool:
        return self.inner.isolates(output_dir)

    def shares_by_binding(self) -> bool:
        return self.inner.shares_by_binding()

    def find_file(self, candidates: tuple[str, ...]) -> str | None:
        return self.inner.find_file(candidates)

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        inside = dataclasses.replace(spec, python_environment=self.environment)
        return self.inner.run(inside, sink)


def python_environment(environment: Environment) -> PythonEnvironment:
    """The launcher's view of a built environment: its path and, in Docker mode, its volume."""
    return PythonEnvironment(environment.path, environment.volume)
