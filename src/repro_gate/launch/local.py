"""Run the training as a local subprocess in its own process group; with `spec.isolation`, in
its own namespaces, seeing the workspace through an overlay (launch/namespaces.py)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch import cancel, namespaces
from repro_gate.launch.base import LineSink, RunOutcome, RunSpec
from repro_gate.launch.environment import build_environment
from repro_gate.launch.processes import RunProcesses
from repro_gate.launch.shell import shell_failure
from repro_gate.launch.stream import CHUNK_BYTES, OutputPump, open_log

# How long a timed-out run gets between SIGTERM and SIGKILL.
TERMINATE_GRACE_SECONDS = 5.0
# The same on cancel: the CI kills the whole job a few seconds after its first signal.
CANCEL_GRACE_SECONDS = 2.0
# Output still in the pipe when the run has ended; a stray holding the pipe is not waited for.
DRAIN_SECONDS = 1.0
POLL_SECONDS = 0.1


class LocalLauncher:
    """Starts runs on this machine, with the gate's own environment plus the run's variables."""

    name = "local"

    def python_executable(self) -> str:
        """The gate's interpreter: it has torch when `repro-gate[torch]` is installed."""
        return sys.executable

    def isolates(self, output_dir: Path) -> bool:
        """Where the kernel gives an unprivileged user its own namespaces and overlays."""
        return namespaces.usable(output_dir)

    def shares_by_binding(self) -> bool:
        """A local copy (namespaces refused) links to virtualenvs and data: nothing binds."""
        return False

    def find_file(self, candidates: tuple[str, ...]) -> str | None:
        return next((path for path in candidates if os.path.isfile(path)), None)

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        """Start the run, stream and log its output, and wait for it or its timeout.

        However the run ends (exit, timeout, cancellation, an error of the gate), none of the
        processes it started is left running.
        """
        env = build_environment(os.environ, spec)
        pump = OutputPump(open_log(spec), sink)
        tree = RunProcesses()
        started = time.monotonic()
        report = _Report() if spec.isolation is not None else None
        try:
            tree.process = _start(spec, env, report)
            assert tree.process.stdout is not None
            pump.start(_read_chunks(tree.process.stdout.fileno(), pump.stopping))
            timed_out = _wait(tree, spec)
            wall_seconds = time.monotonic() - started
        except BaseException:
            with cancel.deferred():
                tree.stop(CANCEL_GRACE_SECONDS)
                if report is not None:
                    report.discard()
            raise
        finally:
            with cancel.deferred():
                # The training may leave children behind (DataLoader workers, servers, daemons).
                tree.kill_all()
                pump.finish(DRAIN_SECONDS)
                if tree.process is not None and tree.process.stdout is not None:
                    tree.process.stdout.close()
                if report is not None:
                    report.close_writer()
        exit_code = None if timed_out else tree.process.returncode
        if report is not None:
            ending = report.read(spec)
            exit_code = None if timed_out else ending.exit_code
        missing = shell_failure(spec.argv, exit_code, spec.log_path,
                                f"run {spec.name}, in {spec.workdir}")
        if missing is not None:
            raise missing
        return RunOutcome(
            exit_code=exit_code,
            wall_seconds=wall_seconds,
            timed_out=timed_out,
        )


class _Report:
    """The pipe on which an isolated run's init says how the training ended."""

    def __init__(self) -> None:
        self.reader, self.writer = os.pipe()

    def argv(self, spec: RunSpec) -> list[str]:
        return namespaces.init_command(json.dumps(namespaces.plan(spec)), str(self.writer))

    def close_writer(self) -> None:
        if self.writer >= 0:
            os.close(self.writer)
            self.writer = -1

    def discard(self) -> None:
        self.close_writer()
        os.close(self.reader)

    def read(self, spec: RunSpec) -> namespaces.Ending:
        """Only once the run is over: every writer has closed the pipe by then."""
        self.close_writer()
        return namespaces.read_report(self.reader, spec)


def _start(spec: RunSpec, env: dict[str, str], report: _Report | None
           ) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            spec.argv if report is None else report.argv(spec),
            cwd=spec.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=() if report is None else (report.writer,),
        )
    except FileNotFoundError:
        raise GateError(
            f"command not found: {spec.argv[0]} (run {spec.name}, in {spec.workdir})",
            kind=ErrorKind.COMMAND_NOT_FOUND,
        ) from None
    except PermissionError:
        raise GateError(
            f"command is not executable: {spec.argv[0]} (run {spec.name})",
            kind=ErrorKind.COMMAND_NOT_FOUND,
        ) from None
    except NotADirectoryError:
        raise GateError(
            f"workdir is not a directory: {spec.workdir}", kind=ErrorKind.CONFIG
        ) from None


def _wait(tree: RunProcesses, spec: RunSpec) -> bool:
    """Wait for the main process; on timeout, or when the gate asks (`spec.stop`), stop the
    whole run. True when it timed out."""
    assert tree.process is not None
    deadline = None if spec.timeout is None else time.monotonic() + spec.timeout
    while True:
        try:
            tree.process.wait(timeout=POLL_SECONDS)
            return False
        except subprocess.TimeoutExpired:
            pass
        if spec.stop.is_set():
            tree.kill_all()  # its records are the gate's already: nothing to wait for
            return False
        if deadline is not None and time.monotonic() >= deadline:
            tree.stop(TERMINATE_GRACE_SECONDS)
            return True


def _read_chunks(fd: int, stopping: threading.Event) -> Iterator[bytes]:
    """What the run writes to the pipe, in chunks of at most CHUNK_BYTES, until EOF or stop."""
    while not stopping.is_set():
        ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
        if not ready:
            continue
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except OSError:
            return
        if not chunk:
            return
        yield chunk
