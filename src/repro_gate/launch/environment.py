"""The process environment of a local run: the gate's own, minus its credentials, plus the
run's variables."""

from __future__ import annotations

import os
from collections.abc import Mapping

from repro_gate.credentials import without_credentials
from repro_gate.launch.base import RunSpec
from repro_gate.launch.shell_assignments import GATE_PYTHONPATH
from repro_gate.probe import ENV_RUN_DIR


def build_environment(base: Mapping[str, str], spec: RunSpec) -> dict[str, str]:
    """`base` without the gate's credentials (docs/security.md), then the run's variables.

    PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES and the user's own variables pass through.
    """
    env = without_credentials(base)
    env.update(spec.env)
    env[ENV_RUN_DIR] = str(spec.run_dir)
    paths = [str(p) for p in spec.python_path]
    env[GATE_PYTHONPATH] = os.pathsep.join(paths)  # for the command's own PYTHONPATH
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if spec.python_environment is not None:
        environment = spec.python_environment
        env["PATH"] = os.pathsep.join(filter(None, [str(environment.bin_dir), env.get("PATH")]))
        env["VIRTUAL_ENV"] = str(environment.root)
        env.pop("PYTHONHOME", None)
    if spec.preload is not None:
        env["LD_PRELOAD"] = preloads(spec.preload, env.get("LD_PRELOAD"))
    # Stream output as it happens; buffering does not change what the training computes.
    env["PYTHONUNBUFFERED"] = "1"
    return env


def preloads(first: str, already: str | None) -> str:
    """LD_PRELOAD with `first` before the libraries it already names."""
    return " ".join(filter(None, [first, already]))
