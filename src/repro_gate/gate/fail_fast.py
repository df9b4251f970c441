"""Fail-fast, on the gate's side: run B stopped at its first step that differs from run A.

While run B lasts, a thread of the gate follows B's trajectory files (one per rank) in B's run
folder, reading only the lines added since the last look, never through a link
(probe/run_files.py), and matches each complete line with run A's record of the same rank and
step. At the first that differs it writes the probe's `stop` file in B's probe folder (never
through a link): the probe stops B at its next step, writing its alerts, fingerprint and
status as at a run's end; a run still going STOP_GRACE_SECONDS later is ended by the launcher
(the run's `stop`). On an accelerator the probe writes a step's line one step late. Once the run is
over the rest of its files is looked at too, so a run that ended before a poll saw its
divergence is judged the same: B's record keeps its steps up to the first divergent step
(`up_to`), whenever the process was stopped. Run A's records stay with the gate: no run is
given another run's files.

A step differs when its parameters' digests or its loss's bits differ; under a tolerance (the
upgrade check's trials) only the loss is compared, within the gate's rule (compare/tolerance.py).
A link where B's records should be stops B too, and is the error `run_tampered` once it ended.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from repro_gate.compare.tolerance import Tolerance
from repro_gate.errors import RunTamperedError
from repro_gate.launch.base import RunSpec
from repro_gate.probe import (
    PROBE_SUBDIR,
    STOP_FILE,
    TRAJECTORY_FILE,
    rank_file,
    recorded_ranks,
    run_files,
)

POLL_SECONDS = 0.05  # how often B's trajectory files are looked at while it runs
STOP_GRACE_SECONDS = 10.0  # for the probe to stop the run at its next step, before a kill

Record = dict[str, Any]  # one step's line of a trajectory file, as the probe wrote it


@dataclass(frozen=True)
class Divergence:
    """Where fail-fast stopped a run: the first step seen to differ, and its rank."""

    rank: int
    step: int


@dataclass(frozen=True)
class Reference:
    """Run A's steps, by rank and step, and how a step of another run is matched with them."""

    steps: dict[int, dict[int, Record]]
    loss_tolerance: Tolerance | None = None  # None: bitwise (parameters and loss)

    @classmethod
    def of(cls, trajectories: dict[int, list[Record]],
           loss_tolerance: Tolerance | None = None) -> Reference | None:
        """The reference of run A's trajectories by rank; None when A recorded no step."""
        steps = {rank: {entry["step"]: entry for entry in entries
                        if isinstance(entry, dict) and isinstance(entry.get("step"), int)}
                 for rank, entries in trajectories.items()}
        steps = {rank: by_step for rank, by_step in steps.items() if by_step}
        return cls(steps, loss_tolerance) if steps else None

    def differs(self, rank: int, entry: Record) -> bool:
        """Whether `entry` (a step of rank `rank`) differs from run A's same step; a step A did
        not record (another rank, a longer run) has nothing to differ from."""
        step = entry.get("step")
        expected = self.steps.get(rank, {}).get(step) if isinstance(step, int) else None
        if expected is None:
            return False
        if self.loss_tolerance is None:
            return bool(expected.get("params") != entry.get("params")
                        or expected.get("loss") != entry.get("loss"))
        return _loss_differs(expected.get("loss"), entry.get("loss"), self.loss_tolerance)


def _loss_differs(expected: Any, seen: Any, tolerance: Tolerance) -> bool:
    if expected is None or seen is None or expected == seen:
        return False  # a step without a loss on either side has nothing to compare
    try:
        return not tolerance.allows(float.fromhex(expected), float.fromhex(seen))
    except (TypeError, ValueError):
        return True  # not a loss the probe writes: what the bitwise comparison says


@dataclass
class _Followed:
    """How far one rank's trajectory file was read: its offset, a partial last line."""

    offset: int = 0
    partial: bytes = b""


@dataclass
class Watch:
    """Follows one run's trajectory files against a reference while the run lasts."""

    spec: RunSpec
    reference: Reference | None
    divergence: Divergence | None = None
    tampering: RunTamperedError | None = None
    _files: dict[int, _Followed] = field(default_factory=dict)

    @contextmanager
    def running(self) -> Iterator[None]:
        """Follow the run in a thread while the block runs (nothing without a reference)."""
        if self.reference is None:
            yield
            return
        finished = threading.Event()
        thread = threading.Thread(target=self._follow, args=(finished,), daemon=True)
        thread.start()
        try:
            yield
        finally:
            finished.set()
            thread.join()

    def finish(self) -> None:
        """Once the run is over: look at what it wrote since the last poll, then raise the
        error of a link met in its records."""
        if self.reference is not None and self.divergence is None and self.tampering is None:
            try:
                self.divergence = self.look()
            except RunTamperedError as error:
                self.tampering = error
            except OSError:  # the gate's readers after the run report what is unreadable
                pass
        if self.tampering is not None:
            raise self.tampering

    def _follow(self, finished: threading.Event) -> None:
        while not finished.wait(POLL_SECONDS):
            try:
                self.divergence = self.look()
            except RunTamperedError as error:
                self.tampering = error
            except OSError:  # unreadable for now: the run's end decides
                continue
            if self.divergence is not None and self._ask_probe_to_stop():
                finished.wait(STOP_GRACE_SECONDS)
            if self.divergence is not None or self.tampering is not None:
                self.spec.stop.set()  # a no-op once the run ended
                return

    def _ask_probe_to_stop(self) -> bool:
        """Write the probe's stop file; False when it cannot be (the run took its name, or a
        link is on the way: then the run is ended at once)."""
        try:
            run_files.create(self.spec.run_dir, f"{PROBE_SUBDIR}/{STOP_FILE}")
        except RunTamperedError as error:
            self.tampering = error
            return False
        except OSError:
            return False
        return True

    def look(self) -> Divergence | None:
        """Read what the run added to its trajectory files; the first step that differs."""
        assert self.reference is not None
        for rank in recorded_ranks(self.spec.run_dir):
            followed = self._files.setdefault(rank, _Followed())
            rel = f"{PROBE_SUBDIR}/{rank_file(TRAJECTORY_FILE, rank)}"
            added = run_files.read_bytes(self.spec.run_dir, rel, followed.offset) or b""
            followed.offset += len(added)
            *lines, followed.partial = (followed.partial + added).split(b"\n")
            for line in lines:
                entry = _parsed(line)
                if entry is not None and self.reference.differs(rank, entry):
                    return Divergence(rank, int(entry["step"]))
        return None


def up_to(steps: list[Record], divergence: Divergence) -> list[Record]:
    """A rank's steps up to the divergent step: what fail-fast keeps of a run it stopped."""
    kept = []
    for entry in steps:
        step = entry.get("step")
        if isinstance(step, int) and step > divergence.step:
            break
        kept.append(entry)
    return kept


def _parsed(line: bytes) -> Record | None:
    try:
        entry = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return entry if isinstance(entry, dict) and isinstance(entry.get("step"), int) else None
