"""Run G: the pull request's code run once in the golden file's software, when both the software
and the code changed since the golden file's commit.

The gate can bring back one kind of software: the dependency lock. When the lock differs
(`upgrade.lock`, else uv.lock, else requirements.txt, read at the golden file's commit with
`git show`) and nothing else that a lock cannot bring back differs (the image, Python, torch,
CUDA, cuDNN, the driver), its environment is built the way the upgrade check builds its baseline
(same builders, same cache) and the gate runs the training there once, as run G. Equal to the
golden trajectory: the software change did it; else the code. Anything else is the reason the
attribution stays `unknown`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro_gate.config import Config
from repro_gate.environments import (
    Environment,
    read_lock,
)
from repro_gate.environments.builders import builder_for
from repro_gate.environments.dependency_lock import DEFAULT_LOCKS
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.golden import history
from repro_gate.golden.document import RunData
from repro_gate.manifest.store import write_text_atomic

RUN_NAME = "G"
PURPOSE = "golden_attribution"  # run G's `purpose` in the manifest's `runs[]`
REBUILD_SUBDIR = "golden-rebuild"  # in the output directory: the golden commit's lock
# Software a rebuilt lock brings back (`packages`: what the lock installs); any other field
# that differs is not rebuilt.
LOCK_FIELDS = ("lock", "packages")

# Runs the training once in an environment (the gate's run G); a GateError when it fails.
RunIn = Callable[[Environment], RunData]


def rebuild_and_run(config: Config, golden: dict[str, Any], diff: list[dict[str, Any]],
                    run_in: RunIn) -> RunData | str:
    """Run G's data, or the one-line reason it could not run."""
    fields = {entry["field"]: entry for entry in diff}
    if "lock" not in fields:
        return "the lock is the golden file's, so the software change is not one a lock rebuilds"
    others = [f for f in fields if f not in LOCK_FIELDS]
    if others:
        first = fields[others[0]]
        return (f"the golden file's {first['field']} ({first['golden']}) is not rebuilt, only"
                f" its lock (this run's: {first['run']})")
    commit = golden["software"].get("commit")
    if not commit:
        return "the golden file names no commit, so its lock cannot be read"
    try:
        lock_path = golden_lock(config, commit)
        lock = read_lock(lock_path, role="the golden file's lock", project=config.workdir)
        environment = builder_for(config, lock.sources)(lock.pins())
    except GateError as error:
        return f"the golden file's software was not rebuilt: {error.message}"
    try:
        return run_in(environment)
    except GateError as error:
        return f"run {RUN_NAME} in the golden file's software did not finish: {error.message}"


def golden_lock(config: Config, commit: str) -> Path:
    """The lock at the golden file's commit, written under the output directory."""
    names = (config.upgrade.lock,) if config.upgrade.lock else DEFAULT_LOCKS
    for name in names:
        text = history.git(config.workdir, "show", f"{commit}:./{name}")
        if text is not None:
            path = config.output_dir / REBUILD_SUBDIR / Path(name).name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomic(path, text)
            except OSError as error:
                raise GateError(f"{path} was not written: {one_line(error)}",
                                kind=ErrorKind.OUTPUT_DIR) from None
            return path
    raise GateError(f"no {' or '.join(names)} at the golden file's commit {commit[:12]}",
                    kind=ErrorKind.LOCKFILE)


def with_fingerprint(run: RunData, fingerprint: dict[str, Any]) -> RunData:
    return dataclasses.replace(run, fingerprint=fingerprint)
