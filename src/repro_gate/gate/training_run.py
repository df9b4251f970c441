"""Plan and execute the gate's runs: deterministic A, B, …, the cost run, the noise floor."""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro_gate import notices, probe
from repro_gate.compare import sha256_file
from repro_gate.compare.run_pair import RunSide
from repro_gate.config import Config
from repro_gate.cost import plan as cost_plan
from repro_gate.errors import ErrorKind, GateError
from repro_gate.fingerprint.seeding import DETERMINISM_VARIABLES
from repro_gate.gate import collect as artifacts
from repro_gate.gate import fail_fast, workcopy
from repro_gate.launch import progress
from repro_gate.launch.base import Launcher, LineSink, Mode, RunOutcome, RunSpec
from repro_gate.launch.shell import shell_argv

LOG_TAIL_LINES = 20  # the lines of a failed run's log that its error shows

REFERENCE_DIR = Path(__file__).parents[1] / "reference"
REFERENCE_MODULE = "repro_gate_reference"
COST_RUN_NAME = "cost"  # one process, determinism switched between blocks of steps
NOISE_FLOOR_RUN_NAMES = ("default", "default2")  # two default-mode runs, compared
DIVERGENCE = "divergence"  # `stopped`: fail-fast stopped the run at its first divergent step
HASH_SEED_VARIABLE = "PYTHONHASHSEED"
# Run A's hash seed; run B gets 1, C 2, …: fixed, so a run can be repeated, and different, so a
# training whose numbers follow the hash seed (a vocabulary numbered by iterating a set of
# strings) fails the plain check. Runs compared with A alone (R, G, L) get A's.
RUN_A_HASH_SEED = 0


@dataclass
class RunRecord:
    """Everything the gate knows about one finished run."""

    name: str
    mode: Mode
    launcher: str
    run_dir: Path
    log_path: Path
    exit_code: int | None
    wall_seconds: float
    timed_out: bool
    # "divergence" when the gate stopped it (fail-fast), "max_steps" when the probe did
    stopped: str | None
    trajectory: list[dict[str, Any]]  # rank 0's steps (the only rank of a single process)
    alerts: list[dict[str, Any]]
    probe_status: dict[str, Any] | None
    in_process_fingerprint: dict[str, Any] | None
    artifacts: list[artifacts.Artifact]
    unmatched_globs: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    other_ranks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # rank >= 1
    divergence: fail_fast.Divergence | None = None  # where fail-fast stopped it
    # "localisation": the extra run of gate/localise.py, never compared, timed or fingerprinted
    purpose: str | None = None
    hash_seed: str | None = None  # PYTHONHASHSEED as the run got it; None when the gate set none

    @property
    def ranks(self) -> int:
        """How many ranks recorded steps (1 for a single process, even one that never stepped)."""
        return len(self.other_ranks) + (1 if self.trajectory or not self.other_ranks else 0)

    @property
    def ended_cleanly(self) -> bool:
        """Exited 0, or was stopped on purpose by the gate or the probe."""
        if self.timed_out:
            return False
        if self.exit_code == 0 or self.stopped == DIVERGENCE:
            return True
        # torchrun and mp.spawn report a rank the probe stopped as their own failure (exit 1).
        return self.stopped is not None and (
            self.exit_code == probe.STOP_EXIT_CODE or self.ranks > 1
        )

    def log_tail(self, count: int = LOG_TAIL_LINES) -> str:
        """The last `count` lines of the run's log, for error reports."""
        return log_tail(self.log_path, count)

    def side(self) -> RunSide:
        """This run as one side of a comparison."""
        return RunSide(self.name, self.trajectory,
                       {a.rel_path: a.path for a in self.artifacts}, self.stopped,
                       other_ranks=self.other_ranks)

    def to_manifest(self) -> dict[str, Any]:
        """The run's entry in the manifest's `runs[]`."""
        entry: dict[str, Any] = {
            "name": self.name,
            "mode": self.mode,
            "launcher": self.launcher,
            "exit_code": self.exit_code,
            "wall_seconds": round(self.wall_seconds, 6),
            "steps": len(self.trajectory),
            "log_path": str(self.log_path),
            "run_dir": str(self.run_dir),
            "artifacts": [
                {"path": a.rel_path, "sha256": sha256_file(a.path), "bytes": a.path.stat().st_size}
                for a in self.artifacts
            ],
            "timed_out": self.timed_out,
            "stopped": self.stopped,
        }
        if self.ranks > 1:
            entry["ranks"] = self.ranks
        if self.purpose is not None:
            entry["purpose"] = self.purpose
        if self.hash_seed is not None:
            entry["hash_seed"] = self.hash_seed
        if "container" in self.details:
            entry["container"] = self.details["container"]
        return entry


def command_argv(config: Config, launcher: Launcher) -> tuple[list[str], list[Path]]:
    """The command to run and the extra PYTHONPATH entries it needs (the reference's directory).

    A command string runs through the shell, as the user wrote it but for its own PYTHONPATH
    assignments, which keep the gate's folders in front (launch/shell_assignments.py); an argv
    list runs as is. The reference trains `reference.steps` in every run, the cost run
    included: like any training, the cost run is the training as written, and one too short
    to time says so.
    """
    if isinstance(config.command, str):
        return shell_argv(config.command), []
    if config.command:
        return list(config.command), []
    reference = config.reference
    argv = [
        launcher.python_executable(), "-m", REFERENCE_MODULE,
        "--steps", str(reference.steps),
        "--batch-size", str(reference.batch_size),
        "--width", str(reference.width),
        "--device", reference.device,
    ]
    return argv, [REFERENCE_DIR]


def user_environment(config: Config) -> str:
    """The probe's REPRO_GATE_USER_ENV: each determinism variable's value in the user's own
    environment (the gate's, then the configured `env`), and the gate's value."""
    values: dict[str, str | None] = {}
    for name, value in DETERMINISM_VARIABLES.items():
        values[name] = config.env.get(name, os.environ.get(name))
        values[f"gate:{name}"] = value
    return json.dumps(values, sort_keys=True)


def run_environment(config: Config, mode: Mode, max_steps: int,
                    hash_seed: int = RUN_A_HASH_SEED) -> dict[str, str]:
    """Variables of the probe contract for one run, then the user's `env` on top (a
    `PYTHONHASHSEED` there is every run's: the user chose it)."""
    env: dict[str, str] = {
        probe.ENV_MODE: mode,
        probe.ENV_DETERMINISM: config.determinism,
    }
    if config.seed is not None and mode == "deterministic":  # opt-in: the gate seeds
        env[probe.ENV_SEED] = str(config.seed)
    if max_steps > 0:
        env[probe.ENV_MAX_STEPS] = str(max_steps)
    # Read once at start-up, these cannot be switched between the cost run's blocks: both of
    # its arms run with them, so its figure leaves them out (cost.note says so).
    if mode in ("deterministic", "cost"):
        env.update(DETERMINISM_VARIABLES)
        env[probe.ENV_USER_ENV] = user_environment(config)
    if mode == "deterministic":
        env[HASH_SEED_VARIABLE] = str(hash_seed)
    if mode == "cost":
        env[probe.ENV_COST_PLAN] = cost_plan.plan(config.cost).to_env()
    env.update(config.env)
    return env


def build_spec(
    config: Config,
    launcher: Launcher,
    name: str,
    mode: Mode,
    max_steps: int = 0,
    hash_seed: int = RUN_A_HASH_SEED,
) -> RunSpec:
    """A fresh run directory and the spec of one run: it sees the working directory through
    an overlay whose upper layer is in the run directory where the launcher isolates runs,
    else it starts in a fresh copy of it there. Either way the gate's folders are hidden from
    it: no run sees another run's folder, the logs or the locks. `hash_seed` is a deterministic
    run's."""
    output_dir = config.output_dir
    with progress.watching_phase(f"removing the earlier run folder of run {name}"):
        run_dir = fresh_run_dir(output_dir / "runs" / name)
    isolation, workdir = None, config.workdir
    shared: tuple[Path, ...] = ()
    if launcher.isolates(output_dir) and overlay_allowed(config.workdir, output_dir):
        isolation = workcopy.isolation(config.workdir, run_dir)
    else:
        copy = _copy(config, name, launcher.shares_by_binding())
        workdir, shared = copy.path, copy.shared
    argv, extra_path = command_argv(config, launcher)
    return RunSpec(
        name=name,
        mode=mode,
        argv=argv,
        workdir=workdir,
        workspace=config.workdir,
        isolation=isolation,
        run_dir=run_dir,
        env=run_environment(config, mode, max_steps, hash_seed),
        timeout=config.timeout,
        log_path=output_dir / "logs" / f"{name}.log",
        python_path=[probe.INJECT_DIR, *extra_path],
        hidden=hidden_folders(config.workdir, output_dir),
        shared=shared,
    )


def hidden_folders(workdir: Path, output_dir: Path) -> tuple[Path, ...]:
    """The gate's folders a run must not see (gate.workcopy.gate_folders), once per run."""
    if not workdir.is_dir():
        return (output_dir.resolve(),)
    return workcopy.gate_folders(workdir.resolve(), output_dir.resolve())


@functools.cache
def overlay_allowed(workdir: Path, output_dir: Path) -> bool:
    """Whether every file of `workdir` can be copied up by this gate's user: root maps every
    id; another user maps only its own (said once, and the runs get copies)."""
    if os.geteuid() == 0 or not workdir.is_dir():
        return True
    foreign = workcopy.foreign_entry(workdir.resolve(), output_dir.resolve(), os.geteuid(),
                                     os.getegid())
    if foreign is not None:
        notices.say(f"working copies: each run gets a copy of the working directory, not an"
                    f" overlay: {foreign} belongs to another user or group, which an"
                    f" unprivileged overlay cannot copy up")
    return foreign is None


def _copy(config: Config, name: str, mount_points: bool) -> workcopy.WorkCopy:
    """Run `name`'s copy of the working directory, at the one path every run's copy is made
    (what an interrupted gate left there is removed first)."""
    target = config.output_dir / workcopy.COPY_SUBDIR
    with progress.watching_phase(f"removing an earlier working copy at {target}"):
        fresh_run_dir(target).rmdir()
    tally = workcopy.Tally()
    with progress.watching_phase(f"making the working copy of run {name}", tally.text):
        return workcopy.make(config.workdir, target, config.output_dir, tally, config.data,
                             mount_points)


def fresh_run_dir(run_dir: Path) -> Path:
    """An empty run directory: what an earlier gate left there is removed."""
    try:
        if run_dir.is_symlink() or run_dir.is_file():
            run_dir.unlink()
        elif run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
    except OSError as error:
        where = error.filename or run_dir
        raise GateError(
            f"cannot clear the run directory {run_dir}: {where}: {error.strerror or error}",
            kind=ErrorKind.OUTPUT_DIR,
        ) from None
    return run_dir


def execute(
    launcher: Launcher,
    spec: RunSpec,
    sink: LineSink,
    configured_globs: list[str] | None,
    reference: fail_fast.Reference | None = None,
) -> RunRecord:
    """Run one spec to its end and gather what it left: probe files and artifacts (in its run
    directory, and what it wrote in its working copy, which keeps only that). With a
    `reference`, the run is stopped at its first step that differs from it (fail-fast)."""
    watch = fail_fast.Watch(spec, reference)
    with progress.watching_run(spec, sink), watch.running():
        outcome = launcher.run(spec, sink)
    watch.finish()
    return gather(launcher, spec, outcome, configured_globs, watch.divergence)


def gather(
    launcher: Launcher, spec: RunSpec, outcome: RunOutcome, configured_globs: list[str] | None,
    divergence: fail_fast.Divergence | None = None,
) -> RunRecord:
    """What a finished run left: probe files and artifacts, as `execute` records them."""
    if spec.isolation is not None:
        workcopy.remove_scratch(spec.isolation)
    elif spec.workspace is not None:
        mount_points = frozenset(p.relative_to(spec.workspace).as_posix() for p in spec.shared)
        copy = workcopy.WorkCopy(spec.workdir, spec.workspace, mount_points)
        copy.name_workspace_files(spec.run_dir)
        with progress.watching_phase(f"removing what run {spec.name} did not write from its"
                                     " working copy"):
            copy.keep_only_written()
        copy.move_to(spec.run_dir / workcopy.WORK_SUBDIR)
    trajectories = probe.read_trajectories(spec.run_dir)
    if divergence is not None:  # fail-fast stopped following it there
        trajectories = {rank: fail_fast.up_to(steps, divergence)
                        for rank, steps in trajectories.items()}
    ranks = sorted({0, *trajectories})
    statuses = [probe.read_json(spec.run_dir, probe.STATUS_FILE, rank) for rank in ranks]
    alerts = [
        alert
        for rank in ranks
        for alert in _as_list(probe.read_json(spec.run_dir, probe.ALERTS_FILE, rank))
    ]
    with progress.watching_phase(f"collecting the artifacts of run {spec.name}"):
        collection = artifacts.collect(spec.run_dir, configured_globs)
    return RunRecord(
        name=spec.name,
        mode=spec.mode,
        launcher=launcher.name,
        run_dir=spec.run_dir,
        log_path=spec.log_path,
        exit_code=outcome.exit_code,
        wall_seconds=outcome.wall_seconds,
        timed_out=outcome.timed_out,
        stopped=DIVERGENCE if divergence is not None else _stop_reason(statuses),
        trajectory=trajectories.get(0, []),
        alerts=alerts,
        probe_status=statuses[0],
        in_process_fingerprint=probe.read_json(spec.run_dir, probe.FINGERPRINT_FILE),
        artifacts=collection.artifacts,
        unmatched_globs=collection.unmatched_globs,
        details=dict(outcome.details),
        other_ranks={rank: steps for rank, steps in trajectories.items() if rank > 0},
        divergence=divergence,
        hash_seed=spec.env.get(HASH_SEED_VARIABLE),
    )


def _stop_reason(statuses: list[Any]) -> str | None:
    """Why the probe stopped the run on its own (any rank's reason). Only the gate stops a run
    for a divergence: a status that claims one, or a stop the gate asked for, is not believed."""
    reasons = [s.get("stopped") for s in statuses if isinstance(s, dict) and s.get("stopped")]
    return next((reason for reason in reasons
                 if reason not in (DIVERGENCE, probe.GATE_STOP_REASON)), None)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def log_tail(path: Path, count: int = LOG_TAIL_LINES) -> str:
    """The last `count` lines of a log, for error reports ("" when it cannot be read)."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-count:])


def run_failure(record: RunRecord, timeout: float | None) -> GateError | None:
    """The error of a run that timed out or exited with an error; None when it ended cleanly."""
    label = f"run {record.name} ({record.mode})"
    if record.timed_out:
        limit = f" (timeout: {timeout:g} s)" if timeout is not None else ""
        return GateError(f"{label} timed out after {record.wall_seconds:.1f} s{limit} and was"
                         f" killed (log: {record.log_path})", kind=ErrorKind.TIMEOUT,
                         detail=record.log_tail())
    if not record.ended_cleanly:
        return GateError(f"{label} exited with code {record.exit_code} (log: {record.log_path})",
                         kind=ErrorKind.RUN_FAILED, detail=record.log_tail())
    return None
