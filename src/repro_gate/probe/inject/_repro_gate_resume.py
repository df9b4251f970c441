"""The resume check's two processes of run R: where the first stops, where the second starts.

R's first process (REPRO_GATE_RESUME_AFTER=K, without REPRO_GATE_RESUME_STEP): the checkpoint
writes `_repro_gate_checkpoints` reports count when the process has completed at least K
optimizer steps; that count is the checkpoint's step s. The files written at one step are one
checkpoint, whose path is the last one written (after a rename, the final name). At the first
optimizer step that begins after it (the pre-hook of step s + 1, before anything is updated), the
probe writes RESUME_POINT_FILE, {"step", "checkpoint", "paths", "kind"}, and stops the process
cleanly (stop reason "resume_point"). A training that ends without a step after such a write
leaves no resume point: the gate says it found no checkpoint.

Under torchrun often rank 0 alone writes, and every rank must stop at the same step. So the rank
that writes a checkpoint says so at once, in its CHECKPOINT_WRITTEN file (probe-internal), and at
each optimizer step every rank looks for the other ranks' files; a rank stops once it has
completed the step of one it finds. Why a rank cannot miss the file: with DDP, a rank's step s + 1
begins (its optimizer pre-hook) only after its backward of step s + 1, whose gradient allreduce
completes only once every rank has entered that backward, which the writing rank does only after
its write of step s, and so after writing its file. Ranks that train without a collective
between steps have no such order: one may then run a step further than the writer.
Every rank that stops writes its own resume point file (rank 0's keeps the plain name).

The resumed process (REPRO_GATE_RESUME_STEP=s): the probe numbers its steps from s (its first is
s + 1) and appends to the run's files instead of starting them afresh.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from _repro_gate_contract import (
    ENV_RESUME_AFTER,
    ENV_RESUME_RECORDS,
    ENV_RESUME_STEP,
    RESUME_POINT_FILE,
    STATUS_FILE,
    rank_file,
)
from _repro_gate_files import int_env, read_json, write_json
from _repro_gate_param_names import ParameterNames
from _repro_gate_ranks import rank_and_world_size

if TYPE_CHECKING:
    from _repro_gate_resume_state import ResumeRecords

# Probe-internal: a rank wrote a checkpoint that counts (the resume point before the stop).
CHECKPOINT_WRITTEN = "checkpoint_written.json"
STOP_REASON = "resume_point"
RANKS_WAIT = 60.0  # seconds a stopping rank waits for the others' files


def resume_step(on_error: Callable[[str], None]) -> int | None:
    """The checkpoint's step the resumed process continues from; None in any other process."""
    step = int_env(ENV_RESUME_STEP, None, on_error)
    if step is not None and step < 0:
        on_error(f"{ENV_RESUME_STEP}={step} is negative: numbering from 0")
        return 0
    return step


def resume_after(on_error: Callable[[str], None]) -> int | None:
    """K, in R's first process only (the resumed process never stops for a checkpoint)."""
    if os.environ.get(ENV_RESUME_STEP):
        return None
    return int_env(ENV_RESUME_AFTER, None, on_error)


class ResumePoint:
    """R's first process: the checkpoint that counts, and whether a step must stop for it."""

    def __init__(self, torch: Any, after: int, out_dir: str,
                 on_error: Callable[[str], None]) -> None:
        self.after = after
        self.out_dir = out_dir
        self._torch = torch
        self._on_error = on_error
        self.checkpoint: dict[str, Any] | None = None  # this process's own, once one counts

    def on_write(self, kind: str, path: str, step: int) -> None:
        """A checkpoint file or directory was written after `step` optimizer steps."""
        if step < self.after:
            return
        if self.checkpoint is None or self.checkpoint["step"] != step:
            self.checkpoint = {"step": step, "checkpoint": path, "paths": [], "kind": kind}
        paths = self.checkpoint["paths"]
        if path in paths:
            paths.remove(path)
        paths.append(path)
        self.checkpoint.update(checkpoint=path, kind=kind)
        self._write(CHECKPOINT_WRITTEN)

    def on_rename(self, src: str, dst: str) -> None:
        """A path written (or a directory holding one) was renamed: the final names count."""
        if self.checkpoint is None:
            return
        inside = src + os.sep
        renamed = [dst + path[len(src):] if path == src or path.startswith(inside) else path
                   for path in self.checkpoint["paths"]]
        if renamed != self.checkpoint["paths"]:
            self.checkpoint.update(paths=renamed, checkpoint=renamed[-1])
            self._write(CHECKPOINT_WRITTEN)

    def stop_due(self, steps: int) -> bool:
        """At the pre-hook of step `steps` + 1: True when the process must stop after the step
        it completed, having written its resume point."""
        checkpoint = self._due(steps)
        if checkpoint is not None:
            self.checkpoint = checkpoint
            self._write(RESUME_POINT_FILE)
        return checkpoint is not None

    def _due(self, steps: int) -> dict[str, Any] | None:
        if self.checkpoint is not None:
            return self.checkpoint
        rank, world_size = self._rank()
        for other in range(world_size):
            if other == rank:
                continue
            path = os.path.join(self.out_dir, rank_file(CHECKPOINT_WRITTEN, other))
            if os.path.exists(path):
                found = read_json(path)
                if isinstance(found, dict) and isinstance(found.get("step"), int) \
                        and found["step"] <= steps:
                    return found
        return None

    def _rank(self) -> tuple[int, int]:
        return rank_and_world_size(self._torch, self._on_error)

    def _write(self, name: str) -> None:
        rank, _ = self._rank()
        try:
            write_json(os.path.join(self.out_dir, rank_file(name, rank)), self.checkpoint)
        except OSError as error:
            self._on_error(f"writing {rank_file(name, rank)}: {error!r}")


class Resume:
    """The probe's part in the resume check, in every process (idle when not configured)."""

    def __init__(self, out_dir: str, on_error: Callable[[str], None]) -> None:
        self.out_dir = out_dir
        self._on_error = on_error
        self.first_step = resume_step(on_error)  # the resumed process: numbered on from it
        self.point: ResumePoint | None = None  # R's first process, once torch is imported
        self.records: ResumeRecords | None = None  # with the records, once torch is imported

    def install(self, torch: Any, steps: Callable[[], int], names: ParameterNames) -> None:
        """Once torch is imported: with REPRO_GATE_RESUME_RECORDS=1, record the state each step
        begins with (`names` shows each root call's start); in R's first process, watch the
        checkpoint writes from now on (`steps()`: the optimizer steps completed)."""
        if os.environ.get(ENV_RESUME_RECORDS) == "1":
            from _repro_gate_resume_state import ResumeRecords

            self.records = ResumeRecords(self.out_dir, steps, self.first_step is not None,
                                         self._on_error)
            names.on_root_start = self.records.on_root_start
        after = resume_after(self._on_error)
        if after is None:
            return
        from _repro_gate_checkpoints import CheckpointWatch

        point = self.point = ResumePoint(torch, after, self.out_dir, self._on_error)
        watch = CheckpointWatch(lambda kind, path: point.on_write(kind, path, steps()),
                                point.on_rename, self._on_error)
        watch.install(torch)

    def before_step(self, optimizer: Any, steps: int) -> bool:
        """At an optimizer step's pre-hook, after `steps`: True when the process must stop (its
        resume point is written); else the step's record is taken."""
        if self.point is not None and self.point.stop_due(steps):
            return True
        if self.records is not None:
            self.records.before_step(optimizer, steps + 1)
        return False

    def before_exit(self, reason: str, world_size: int) -> None:
        """Stopping at the resume point, once this rank's files are written: wait (at most
        RANKS_WAIT seconds) until every rank has written its status with that stop, so that no
        rank's exit makes a launcher (torchrun) kill another before its files are complete."""
        if reason != STOP_REASON or world_size <= 1:
            return
        deadline = time.monotonic() + RANKS_WAIT
        waiting = set(range(world_size))
        while waiting and time.monotonic() < deadline:
            waiting = {rank for rank in waiting if not _stopped_here(self.out_dir, rank)}
            if waiting:
                time.sleep(0.02)

    def after_step(self, rank: int) -> None:
        """At an optimizer step's post-hook: the step's record is written."""
        if self.records is not None:
            self.records.after_step(rank)


def _stopped_here(out_dir: str, rank: int) -> bool:
    """True when `rank` wrote its status, stopped at the resume point."""
    status = read_json(os.path.join(out_dir, rank_file(STATUS_FILE, rank)))
    return isinstance(status, dict) and status.get("stopped") == STOP_REASON
