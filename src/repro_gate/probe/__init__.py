"""The gate side of the probe: the contract with the code injected into the training process.

The injected code lives in `inject/` (that directory is put first on PYTHONPATH). It may use only
the standard library plus torch/numpy when importable, and never imports `repro_gate`. It reads
the variables below and writes its files into `<run dir>/.repro-gate/`. The probe keeps its own
copy of these constants in `inject/_repro_gate_contract.py`; tests/probe/test_probe_contract.py
checks that the two agree.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from repro_gate.probe import run_files

INJECT_DIR = Path(__file__).parent / "inject"

# Environment the gate sets for the training process.
ENV_RUN_DIR = "REPRO_GATE_RUN_DIR"  # the run's fresh directory (writable)
ENV_MODE = "REPRO_GATE_MODE"  # "deterministic", "default" or "cost"
ENV_SEED = "REPRO_GATE_SEED"  # the gate's seed, only when `seed` is set (deterministic runs)
ENV_DETERMINISM = "REPRO_GATE_DETERMINISM"  # "warn" or "strict"
ENV_MAX_STEPS = "REPRO_GATE_MAX_STEPS"  # stop cleanly after this many optimizer steps
# The localisation run: re-execute each module during this step to find a forward divergence.
ENV_LOCALISE_STEP = "REPRO_GATE_LOCALISE_STEP"
# The cost run (mode "cost"): JSON {warmup, blocks, census: arm names; block_steps}, the arm of
# every step; the probe switches the determinism knobs between them (_repro_gate_cost_arms.py).
ENV_COST_PLAN = "REPRO_GATE_COST_PLAN"
# JSON: for each variable the gate sets for determinism, the user's own value before the gate set
# it (null: unset), and under "gate:NAME" the gate's value, so the probe can tell who set it.
ENV_USER_ENV = "REPRO_GATE_USER_ENV"

# The resume check (run R, and run A when `resume` is set). REPRO_GATE_RESUME_AFTER: in R's first
# process, the step from which a checkpoint write counts; the probe stops the run cleanly at the
# first optimizer step that begins after such a write, and writes RESUME_POINT_FILE.
ENV_RESUME_AFTER = "REPRO_GATE_RESUME_AFTER"
# "1": record RESUME_STATE_FILE, the state each step begins with (runs A and R only).
ENV_RESUME_RECORDS = "REPRO_GATE_RESUME_RECORDS"
# Set for the resume command (the user reads them too): the last checkpoint path written, and the
# checkpoint's step; the probe numbers the resumed process's steps from that step and appends to
# the run's files instead of starting them afresh.
ENV_RESUME_CHECKPOINT = "REPRO_GATE_RESUME_CHECKPOINT"
ENV_RESUME_STEP = "REPRO_GATE_RESUME_STEP"

# Files the probe writes, relative to the run directory.
PROBE_SUBDIR = ".repro-gate"
TRAJECTORY_FILE = "trajectory.jsonl"  # one JSON object per optimizer step
ALERTS_FILE = "alerts.json"  # nondeterministic-op alerts, aggregated
STATUS_FILE = "status.json"  # probe status: loaded, stop reason, errors
FINGERPRINT_FILE = "fingerprint.json"  # in-process environment fingerprint
LOCALISE_FILE = "localise.json"  # localisation run: the first divergent module
COST_FILE = "cost_arms.json"  # cost run: arms it could not switch to, the op census
RESUME_POINT_FILE = "resume_point.json"  # run R's first process: the checkpoint it stopped after
RESUME_STATE_FILE = "resume_state.jsonl"  # `resume` set: the state each step begins with
# Written by the gate (fail-fast): the run differs from run A. Every process that steps stops at
# its next step, writing its files as at the end of a run; one that does not is killed.
STOP_FILE = "stop"
# The probe's stop reason then (the gate records the divergence itself; a status cannot claim one).
GATE_STOP_REASON = "stop_file"
# Every process that steps writes the files above under its rank's names; rank 0 keeps the plain
# names (single-process runs), rank 1 writes `trajectory-rank1.jsonl`, `status-rank1.json`, ...
RANK_FILE = "{stem}-rank{rank}{suffix}"

# Exit code the probe uses when it stops a run on purpose (max steps, the resume point).
STOP_EXIT_CODE = 86


def probe_output_dir(run_dir: Path) -> Path:
    """Directory inside a run directory where the probe's files are."""
    return run_dir / PROBE_SUBDIR


def rank_file(name: str, rank: int) -> str:
    """The name of the probe's file `name` for `rank` (rank 0: `name` itself)."""
    if rank == 0:
        return name
    stem, dot, suffix = name.partition(".")
    return RANK_FILE.format(stem=stem, rank=rank, suffix=dot + suffix)


def recorded_ranks(run_dir: Path) -> list[int]:
    """The ranks that left a trajectory file, in order."""
    stem, _, suffix = TRAJECTORY_FILE.partition(".")
    pattern = re.compile(re.escape(stem) + r"-rank([1-9][0-9]*)\." + re.escape(suffix))
    try:
        found = run_files.names(run_dir, PROBE_SUBDIR)
    except OSError:
        return []
    ranks = {0} if TRAJECTORY_FILE in found else set()
    for name in found:
        match = pattern.fullmatch(name)
        if match:
            ranks.add(int(match.group(1)))
    return sorted(ranks)


def read_trajectories(run_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """Every rank's steps, by rank; empty when no process stepped."""
    return {rank: read_trajectory(run_dir, rank) for rank in recorded_ranks(run_dir)}


def read_trajectory(run_dir: Path, rank: int = 0) -> list[dict[str, Any]]:
    """Steps recorded by the probe for `rank`, in order; empty when none were seen."""
    data = read_file(run_dir, rank_file(TRAJECTORY_FILE, rank))
    return trajectory_lines(data or b"")


def trajectory_lines(data: bytes) -> list[dict[str, Any]]:
    """The steps in a trajectory file's bytes, up to a partial or broken line."""
    steps = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                steps.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a run killed mid-write leaves a partial last line
    return steps


def read_json(run_dir: Path, name: str, rank: int = 0) -> Any:
    """One of the probe's JSON files (of `rank`), or None when it was not written."""
    data = read_file(run_dir, rank_file(name, rank))
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def read_file(run_dir: Path, name: str) -> bytes | None:
    """The bytes of the probe's file `name` (None when absent or unreadable); a link on the way
    is the error `run_tampered` (probe/run_files.py)."""
    try:
        return run_files.read_bytes(run_dir, f"{PROBE_SUBDIR}/{name}")
    except OSError:
        return None
