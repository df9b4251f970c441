"""Runs V-<factor> (docs/vary.md): after runs A and B agree, one more deterministic run per
factor of the environment in `vary`, like run A in everything but that factor, compared with
run A exactly as run B is (compare/vary.py), and failing fast against it.

A factor this machine or launcher cannot vary is `not_run` with the reason; a run V that crashes
or times out is `error`. Neither is ever `same` or `changed`.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from repro_gate.compare.document import VaryResult
from repro_gate.compare.vary import Values, compare_vary, error, not_run
from repro_gate.config import Config
from repro_gate.config.vary import VaryFactor
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.gate import fail_fast, training_run
from repro_gate.gate.training_run import RunRecord
from repro_gate.launch import listing, namespaces
from repro_gate.launch.base import Launcher, RunSpec

PURPOSE = "vary"  # never one of the compared runs, timed or fingerprinted
RUN_PREFIX = "V-"
VARIED_HOSTNAME = "repro-gate-varied-host"
MOVED_SUBDIR = "moved"  # in run V-path's folder: where it sees the working copy
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The clock of run V-time: moved on by more than a year, and running.
CLOCK_OFFSET_DAYS = 400
# Where libfaketime lies on Debian and Ubuntu (two architectures), Fedora, Alpine, a source build.
LIBFAKETIME_PATHS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                     "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                     "/usr/lib64/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                     "/usr/local/lib/faketime/libfaketime.so.1")
NOT_AGREED = "runs A and B differ, so no factor was varied"
STOPPED_EARLIER = "the gate stopped before the runs that vary the environment"
IN_NAMESPACES = ("it is varied in a local run's own namespaces, which this run cannot have"
                 " ({why})")
NO_FUSE = ("directory listings are reordered by disorderfs, a FUSE file system, which a"
           " {launcher} run is not given")

# Runs a spec, failing fast against the reference if one is given.
Execute = Callable[[RunSpec, fail_fast.Reference | None], RunRecord]


@dataclass
class Variation:
    """How run V differs from run A: the settings recorded (run V-path's own once its folder
    is made), and what its spec gets."""

    values: Values
    env: dict[str, str] = field(default_factory=dict)
    hostname: str | None = None
    preload: str | None = None


class CannotVary(Exception):
    """The factor cannot be varied here; the message says why, in one line."""


def run_all(config: Config, launcher: Launcher, records: list[RunRecord],
            execute: Execute) -> list[VaryResult]:
    """Every factor of `vary`, in order, once runs A and B ran; the runs join `records`."""
    run_a, others = records[0], records[1:]
    if any(r.stopped == training_run.DIVERGENCE for r in others):
        return [not_run(factor, NOT_AGREED) for factor in config.vary.factors]
    return [_vary(config, launcher, factor, run_a, records, execute)
            for factor in config.vary.factors]


def recorded(config: Config, results: list[VaryResult] | None, agreed: bool
             ) -> list[VaryResult]:
    """`comparison.vary`: what the runs found, or why no factor was varied (runs A and B
    differ, or the gate stopped before)."""
    if not agreed:
        return [not_run(factor, NOT_AGREED) for factor in config.vary.factors]
    if results is None:
        return [not_run(factor, STOPPED_EARLIER) for factor in config.vary.factors]
    return results


def _vary(config: Config, launcher: Launcher, factor: VaryFactor, run_a: RunRecord,
          records: list[RunRecord], execute: Execute) -> VaryResult:
    try:
        variation = _variation(config, launcher, factor, run_a)
        spec = _spec(config, launcher, factor, run_a, variation)
    except CannotVary as why:
        return not_run(factor, str(why))
    reference = None
    if config.fail_fast and config.tolerance.bitwise and (run_a.trajectory or run_a.other_ranks):
        reference = fail_fast.Reference.of({0: run_a.trajectory, **run_a.other_ranks})
    try:
        with _listings(factor, spec):
            record = execute(spec, reference)
    except GateError as failure:
        if failure.kind == ErrorKind.CANCELLED:
            raise
        return error(factor, failure.message, variation.values)
    record.purpose = PURPOSE
    records.append(record)
    crashed = training_run.run_failure(record, config.timeout)
    if crashed is not None:
        return error(factor, crashed.message, variation.values)
    return compare_vary(factor, variation.values, run_a.side(), record.side(), config.tolerance,
                        config.compare, _note(factor, variation, record))


def _variation(config: Config, launcher: Launcher, factor: VaryFactor, run_a: RunRecord
               ) -> Variation:
    """What run V changes, before anything is made for it; CannotVary when this machine or
    launcher cannot change it."""
    if factor == "threads":
        return _threads(run_a)
    if factor == "time":
        return _clock(launcher)
    if launcher.name == "local":
        _check_namespaces(config, launcher)
    elif factor == "fileordering":
        raise CannotVary(NO_FUSE.format(launcher=launcher.name))
    if factor == "hostname":
        return Variation({"A": socket.gethostname(), "V": VARIED_HOSTNAME},
                         hostname=VARIED_HOSTNAME)
    if factor == "fileordering":
        refusal = listing.refusal()
        if refusal is not None:
            raise CannotVary(refusal)
        return Variation({"A": "as the file system lists", "V": "reversed (disorderfs)"})
    return Variation({"A": str(config.workdir)})  # run V's path: once its folder is made


def _check_namespaces(config: Config, launcher: Launcher) -> None:
    """A local run varies the host name, the path and the listings in its own namespaces."""
    refusal = namespaces.refusal(config.output_dir)
    if refusal is not None or not launcher.isolates(config.output_dir):
        raise CannotVary(IN_NAMESPACES.format(why=refusal or "the launcher isolates no run"))
    if not training_run.overlay_allowed(config.workdir, config.output_dir):
        raise CannotVary(IN_NAMESPACES.format(why="the working directory holds files of another"
                                              " user"))


def _spec(config: Config, launcher: Launcher, factor: VaryFactor, run_a: RunRecord,
          variation: Variation) -> RunSpec:
    """Run V's spec: run A's, with the variation applied."""
    spec = training_run.build_spec(config, launcher, RUN_PREFIX + factor, "deterministic")
    spec.env.update(variation.env)
    spec.hostname, spec.preload = variation.hostname, variation.preload
    if factor == "path":
        spec.workspace_at = _moved(spec, config.workdir)
        variation.values["V"] = str(spec.workspace_at)
    return spec


def _threads(run_a: RunRecord) -> Variation:
    """One thread when run A had more, two when it had one."""
    threads = ((run_a.in_process_fingerprint or {}).get("threads") or {}).get("torch_num_threads")
    if not isinstance(threads, int):
        raise CannotVary("run A recorded no thread count (torch was not imported, or the probe"
                         " did not run)")
    varied = 1 if threads > 1 else 2
    return Variation({"A": threads, "V": varied},
                     env={name: str(varied) for name in THREAD_VARIABLES})


def _clock(launcher: Launcher) -> Variation:
    """The clock moved on by CLOCK_OFFSET_DAYS through libfaketime, preloaded: the gate's
    machine's, or the image's."""
    found = launcher.find_file(LIBFAKETIME_PATHS)
    if found is None:
        where = "on this machine" if launcher.name == "local" else "in the image"
        raise CannotVary(f"libfaketime is not installed {where} (the Debian package faketime)")
    today = datetime.date.today()
    later = today + datetime.timedelta(days=CLOCK_OFFSET_DAYS)
    return Variation({"A": today.isoformat(), "V": later.isoformat()}, preload=found,
                     env={"FAKETIME": f"+{CLOCK_OFFSET_DAYS}d",
                          # The probe's step times and the gate's timeout keep the real clock.
                          "FAKETIME_DONT_FAKE_MONOTONIC": "1"})


@contextlib.contextmanager
def _listings(factor: VaryFactor, spec: RunSpec) -> Iterator[None]:
    """While run V-fileordering lasts, the workspace listed in reverse order as its overlay's
    lower layer. The mount point lies outside the workspace (the gate's folders are in it, and
    disorderfs would show its own mount point inside itself); the run sees it read-only."""
    if factor != "fileordering" or spec.isolation is None or spec.workspace is None:
        yield
        return
    mount_point = Path(tempfile.mkdtemp(prefix="repro-gate-listing-"))
    try:
        with listing.reversed_listings(spec.workspace, mount_point) as seen:
            spec.isolation = replace(spec.isolation, lower=seen)
            yield
    finally:
        with contextlib.suppress(OSError):  # never a removal through a mount left behind
            mount_point.rmdir()


def _moved(spec: RunSpec, workdir: Path) -> Path:
    """Where run V-path sees the working copy: a folder of its own run folder (made here),
    whose path differs in length from the workspace's."""
    moved = spec.run_dir / MOVED_SUBDIR / workdir.name
    if len(str(moved)) == len(str(workdir)):
        moved = moved.with_name(f"{workdir.name}-moved")
    try:
        moved.mkdir(parents=True, exist_ok=True)
    except OSError as failure:
        raise CannotVary(f"cannot make the folder of the moved working copy: {one_line(failure)}"
                         ) from None
    return moved


def _note(factor: VaryFactor, variation: Variation, record: RunRecord) -> str:
    """What the reader should know beside the status: a training that sets its own thread
    count did not run with the one the gate gave it."""
    if factor != "threads":
        return ""
    threads = ((record.in_process_fingerprint or {}).get("threads") or {}).get("torch_num_threads")
    if isinstance(threads, int) and threads != variation.values.get("V"):
        return (f"the training sets its own thread count ({threads}): the gate's"
                f" {variation.values.get('V')} did not reach it")
    return ""
