"""The upgrade's gate results, cached: a gate that would run again on the same inputs is read
back instead of run.

The key is the sha256 of everything that decides a gate's result:

    environment  the environment's identity (its cache directory or volume: interpreter, pins,
                 inherited packages) and its pins' sha256
    code         the git commit and the hash of the uncommitted diff, and every file of the
                 working directory the runs copy (path, size, modification time): an edit, an
                 untracked file, a touched file is a new key
    command      the training command
    config       the sha256 of the gate's configuration (runs, seed, tolerance, compare, cost,
                 env, determinism, artifacts, image, ...; not the output directory, the upgrade
                 section or the reporting)
    data         the sha256 of each configured data path
    host         the host name, repro-gate's version and the determinism variables the gate sees

Only a reproducible result is kept (a pass, or a fail on the cost budget alone): an error or a
nondeterministic result is always run again. An entry is `<cache_dir>/gates/<key>/`: the inner
gate's whole output directory (manifest, runs, logs) and `gate.json`, written last, so an entry
without it is incomplete and ignored. Reading one back copies the output directory to where the
gate would have written it and rewrites the paths in its manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from repro_gate import __version__, probe
from repro_gate.config import Config
from repro_gate.environments import Environment
from repro_gate.fingerprint.code import collect_code
from repro_gate.fingerprint.data import hash_data
from repro_gate.gate import collect as artifacts
from repro_gate.gate import file_lock, workcopy
from repro_gate.gate.pipeline import GateOutcome
from repro_gate.gate.training_run import RunRecord, user_environment
from repro_gate.launch.base import Mode

GATES_SUBDIR = "gates"  # in upgrade.cache_dir, beside the environments
ENTRY_MARKER = "gate.json"  # written last: its presence means the entry is complete
OUTPUT_SUBDIR = "output"  # the inner gate's output directory, in an entry
MANIFEST_FILE = "manifest.json"
# Config fields that do not decide the runs' results.
NOT_DECIDING = ("output_dir", "name", "config_file", "upgrade", "report", "metrics",
                "allow_fork_pull_requests")


@dataclass(frozen=True)
class CachedGate:
    """A gate result read back from the cache."""

    outcome: GateOutcome
    key: str
    stored_at: str


def inputs_sha256(config: Config) -> str:
    """The sha256 of what decides both gates of a check alike: code, command, configuration,
    data, host (computed once a check; the data may be large)."""
    identity = {
        "tool": __version__,
        "host": socket.gethostname(),
        "code": _code(config),
        "command": config.command,
        "config": config_sha256(config),
        "data": [(entry["path"], entry["sha256"]) for entry in
                 hash_data([str(path) for path in config.data], config.workdir)["paths"]],
        "determinism_variables": user_environment(config),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def gate_key(inputs: str, environment: Environment) -> str:
    """The key of a gate's result: the check's inputs (`inputs_sha256`) in `environment`."""
    identity = {"inputs": inputs, "environment": environment.volume or environment.path.name,
                "pins": environment.lock_sha256}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def config_sha256(config: Config) -> str:
    """The sha256 of the configuration fields that decide a gate's runs."""
    fields = {name: value for name, value in asdict(config).items() if name not in NOT_DECIDING}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def _code(config: Config) -> dict[str, Any]:
    """The git commit and diff, and the working directory's files as the runs copy them."""
    code = collect_code(config.workdir, file_lock.gate_files(config))
    return {"commit": code["commit"], "diff_sha256": code["diff_sha256"],
            "files": _tree_sha256(config.workdir.resolve(), config)}


def _tree_sha256(root: Path, config: Config) -> str:
    """sha256 over (path, size, mtime) of every file a run's working copy would hold."""
    digest = hashlib.sha256()
    skipped = {config.upgrade.cache_path.resolve(), (root / ".git").resolve()}
    output_dir = config.output_dir.resolve()
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(name for name in subdirs
                            if (here / name).resolve() not in skipped
                            and not workcopy.is_gate_file(here / name, output_dir))
        for name in sorted(files):
            try:
                info = (here / name).lstat()
            except OSError:
                continue
            relative = (here / name).relative_to(root).as_posix()
            digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\n".encode(
                "utf-8", errors="surrogateescape"))
    return digest.hexdigest()


@dataclass(frozen=True)
class GateCache:
    """Gate results under `root` (`<upgrade.cache_dir>/gates`)."""

    root: Path

    def load(self, key: str, target: Path, config: Config) -> CachedGate | None:
        """The result stored under `key`, its output directory copied to `target`; None when
        there is none (or it cannot be read back)."""
        entry = self.root / key
        try:
            meta = json.loads((entry / ENTRY_MARKER).read_text())
            if meta.get("key") != key:
                return None
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(entry / OUTPUT_SUBDIR, target, symlinks=True)
            manifest_path = target / MANIFEST_FILE
            text = manifest_path.read_text()
            text = text.replace(json.dumps(meta["output_dir"])[1:-1],
                                json.dumps(str(target))[1:-1])
            manifest_path.write_text(text)
            manifest = json.loads(text)
            records = [_record(run, config) for run in manifest["runs"]]
            outcome = GateOutcome(manifest, manifest_path, int(meta["exit_code"]),
                                  records=records)
            return CachedGate(outcome, key, str(meta.get("stored_at", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(self, key: str, outcome: GateOutcome, source: Path, stored_at: str) -> None:
        """Keep `outcome` (its output directory is `source`) under `key`; a failure to write
        only means the next check runs the gate again."""
        entry = self.root / key
        partial = self.root / f".{key}.{os.getpid()}.partial"
        try:
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(source, partial / OUTPUT_SUBDIR, symlinks=True)
            meta = {"key": key, "output_dir": str(source), "exit_code": outcome.exit_code,
                    "stored_at": stored_at}
            (partial / ENTRY_MARKER).write_text(json.dumps(meta, indent=2) + "\n")
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(partial, entry)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)


def _record(run: dict[str, Any], config: Config) -> RunRecord:
    """A run of a cached gate as the gate recorded it, read from its run directory as
    training_run.execute reads a run that just ended."""
    run_dir = Path(run["run_dir"])
    trajectories = probe.read_trajectories(run_dir)
    ranks = sorted({0, *trajectories})
    statuses = [probe.read_json(run_dir, probe.STATUS_FILE, rank) for rank in ranks]
    alerts = [alert for rank in ranks
              for alert in _as_list(probe.read_json(run_dir, probe.ALERTS_FILE, rank))]
    collection = artifacts.collect(run_dir, list(config.artifacts))
    return RunRecord(
        name=run["name"], mode=cast(Mode, run["mode"]), launcher=run["launcher"],
        run_dir=run_dir, log_path=Path(run["log_path"]), exit_code=run["exit_code"],
        wall_seconds=float(run["wall_seconds"]), timed_out=bool(run["timed_out"]),
        stopped=run["stopped"], trajectory=trajectories.get(0, []), alerts=alerts,
        probe_status=statuses[0],
        in_process_fingerprint=probe.read_json(run_dir, probe.FINGERPRINT_FILE),
        artifacts=collection.artifacts, unmatched_globs=collection.unmatched_globs,
        details={"container": run["container"]} if "container" in run else {},
        other_ranks={rank: steps for rank, steps in trajectories.items() if rank > 0},
        purpose=run.get("purpose"))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
