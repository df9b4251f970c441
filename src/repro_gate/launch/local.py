"""Run the training as a local subprocess in its own process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import LineSink, RunOutcome, RunSpec
from repro_gate.probe import ENV_REFERENCE_TRAJECTORY, ENV_RUN_DIR

# How long a timed-out run gets between SIGTERM and SIGKILL.
TERMINATE_GRACE_SECONDS = 5.0


class LocalLauncher:
    """Starts runs on this machine, with the gate's own environment plus the run's variables."""

    name = "local"

    def python_executable(self) -> str:
        """The gate's interpreter: it has torch when `repro-gate[torch]` is installed."""
        return sys.executable

    def run(self, spec: RunSpec, sink: LineSink) -> RunOutcome:
        """Start the run, stream and log its output, and wait for it or its timeout."""
        env = build_environment(os.environ, spec)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                spec.argv,
                cwd=spec.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
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

        with spec.log_path.open("wb") as log:
            pump = threading.Thread(target=_pump, args=(process, log, sink), daemon=True)
            pump.start()
            timed_out = False
            try:
                process.wait(timeout=spec.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
            finally:
                # The training may leave children behind (DataLoader workers, servers).
                _signal_group(process.pid, signal.SIGKILL)
            pump.join(timeout=10)
        return RunOutcome(
            exit_code=None if timed_out else process.returncode,
            wall_seconds=time.monotonic() - started,
            timed_out=timed_out,
        )


def build_environment(base: os._Environ[str] | dict[str, str], spec: RunSpec) -> dict[str, str]:
    """The process environment of a local run: the gate's own plus the run's variables."""
    env = dict(base)
    env.update(spec.env)
    env[ENV_RUN_DIR] = str(spec.run_dir)
    paths = [str(p) for p in spec.python_path]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if spec.reference_trajectory is not None:
        env[ENV_REFERENCE_TRAJECTORY] = str(spec.reference_trajectory)
    else:
        env.pop(ENV_REFERENCE_TRAJECTORY, None)
    # Stream output as it happens; buffering does not change what the training computes.
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _pump(process: subprocess.Popen[bytes], log: object, sink: LineSink) -> None:
    assert process.stdout is not None
    for raw in iter(process.stdout.readline, b""):
        log.write(raw)  # type: ignore[attr-defined]
        log.flush()  # type: ignore[attr-defined]
        sink(raw.decode("utf-8", errors="replace").rstrip("\r\n"))


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=TERMINATE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
