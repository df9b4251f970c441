"""The cost run's arms: the determinism knobs switched between blocks of optimizer steps.

In the cost run (REPRO_GATE_MODE=cost) the gate plans, in REPRO_GATE_COST_PLAN, the arm of every
step: warm-up steps rotating through the arms, then blocks of `block_steps` steps in a
counterbalanced order, then (with the breakdown) one profiled census block per arm. At the end of
each step (the optimizer step post-hook, after the step was timed) `CostArms.on_step` labels the
step's record with its arm ("arm", and "block" for timed blocks, "census" for census steps) and
sets the knobs the next step needs. Only knobs torch reads at run time can be switched;
CUBLAS_WORKSPACE_CONFIG is set by the gate for the whole run.

- default: the training's own settings, as they were when the last deterministic block began;
- deterministic: as in the deterministic runs: use_deterministic_algorithms(True, warn_only=True),
  cudnn.deterministic on, cudnn.benchmark off, the training's own fill_uninitialized_memory;
- deterministic_no_fill: the same with torch.utils.deterministic.fill_uninitialized_memory off.

Step 1 runs before any hook can switch anything, so the gate's plan starts in the default arm.
The plan's `block_steps` is the shortest block: at the end of the warm-up the probe times a step
(the median of the warm-up steps that repeat an arm, so that no arm's first-use cost counts) and
lengthens every block to ceil(block_seconds / that time) steps, within the cap REPRO_GATE_MAX_STEPS
leaves (not in a process group of several ranks: each would time its own steps and plan its own
end); it records the length in COST_FILE ("block_steps", "block_steps_planned") and returns, at
each step, the step the run ends at: the end of the plan, or the cap if sooner.
At the end of each round of timed blocks (one per arm) the probe may stop the timed blocks early:
once at least the plan's `stop_pairs` rounds are done and the 95% interval of the cost over them is
at most `stop_width_pct` wide (`_repro_gate_cost_rule.narrow_enough`, a copy of cost/estimate.py's
rule, kept equal by a test); the census blocks follow at once, and COST_FILE records
"stopped_after_pairs". Not in a process group of several ranks, for the reason above.
On an accelerator the host runs ahead of the device: at the end of each block and of the warm-up
the device is synchronised, and the wait is recorded as the step's "drain", so that a block's
queued work is timed in that block. The file COST_FILE says which arms could not be had, what
failed, and the census: self time per step of each op, by arm.

Only the standard library at import; torch is handed in. Nothing here raises into the training:
each failure goes to `on_error` and to COST_FILE, and stops the labelling, so the gate sees
fewer pairs rather than mislabelled ones.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from _repro_gate_contract import COST_FILE, ENV_COST_PLAN
from _repro_gate_cost_rule import narrow_enough, round_log_ratios

ARM_DEFAULT = "default"
ARM_DETERMINISTIC = "deterministic"
ARM_NO_FILL = "deterministic_no_fill"
ARMS = (ARM_DETERMINISTIC, ARM_NO_FILL, ARM_DEFAULT)
CENSUS_OPS = 50  # ops kept per census arm, by time: bounds the file
MICROSECONDS_PER_MS = 1000.0

WriteJson = Callable[[str, Any], None]


@dataclass(frozen=True)
class Slot:
    """What one step is in the plan."""

    arm: str
    block: int | None  # index of the timed block; None in the warm-up and the census
    census: bool
    first: bool  # the first step of its block (or of the warm-up)
    last: bool  # the last step of its block (or of the warm-up)


@dataclass(frozen=True)
class Plan:
    """The arm of every step: warm-up steps, then blocks, then census blocks."""

    warmup: tuple[str, ...]
    blocks: tuple[str, ...]
    census: tuple[str, ...]
    block_steps: int
    block_seconds: float = 0.0  # the shortest block in seconds; 0: `block_steps` only
    stop_pairs: int = 0  # the fewest rounds before an early stop; 0: never stop early
    stop_width_pct: float = 0.0  # stop early once the 95% interval is at most this wide

    @classmethod
    def from_json(cls, text: str) -> Plan:
        document = json.loads(text)
        plan = cls(tuple(document["warmup"]), tuple(document["blocks"]),
                   tuple(document.get("census") or ()), int(document["block_steps"]),
                   float(document.get("block_seconds") or 0.0),
                   int(document.get("stop_pairs") or 0),
                   float(document.get("stop_width_pct") or 0.0))
        unknown = {*plan.warmup, *plan.blocks, *plan.census} - set(ARMS)
        if unknown or plan.block_steps < 1:
            raise ValueError(f"unknown arms {sorted(unknown)} or block_steps {plan.block_steps}")
        if not math.isfinite(plan.block_seconds) or plan.block_seconds < 0:
            raise ValueError(f"block_seconds {plan.block_seconds}")
        return plan

    @property
    def end(self) -> int:
        """The last step of the plan: warm-up, timed blocks, census blocks."""
        return len(self.warmup) + (len(self.blocks) + len(self.census)) * self.block_steps

    def sized(self, step_seconds: float | None, cap: int | None) -> Plan:
        """The plan with blocks of at least `block_seconds` at `step_seconds` a step, but
        ending by step `cap` if that allows longer blocks than planned; never shorter."""
        if not step_seconds or step_seconds <= 0 or self.block_seconds <= 0:
            return self
        steps = math.ceil(self.block_seconds / step_seconds)
        if cap is not None:
            steps = min(steps, (cap - len(self.warmup)) // max(1, len(self.blocks)
                                                                 + len(self.census)))
        return replace(self, block_steps=max(self.block_steps, steps))

    def slot(self, step: int) -> Slot | None:
        """The slot of optimizer step `step` (1-based); None past the end of the plan."""
        warmup = len(self.warmup)
        if step <= warmup:
            return Slot(self.warmup[step - 1], None, False, step == 1, step == warmup)
        index, offset = divmod(step - warmup - 1, self.block_steps)
        first, last = offset == 0, offset == self.block_steps - 1
        if index < len(self.blocks):
            return Slot(self.blocks[index], index, False, first, last)
        index -= len(self.blocks)
        if index < len(self.census):
            return Slot(self.census[index], None, True, first, last)
        return None

    def arms(self) -> set[str]:
        return {*self.warmup, *self.blocks, *self.census}

    def stopped_after(self, rounds: int) -> Plan:
        """The plan with its timed blocks cut after `rounds` rounds; the census follows."""
        return replace(self, blocks=self.blocks[:rounds * len(set(self.blocks))])


@dataclass(frozen=True)
class Knobs:
    """The run-time determinism settings of the process."""

    algorithms: bool
    warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    fill: bool | None  # None: this torch has no fill_uninitialized_memory

    @classmethod
    def read(cls, torch: Any, fill_module: Any) -> Knobs:
        return cls(
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            bool(torch.backends.cudnn.deterministic),
            bool(torch.backends.cudnn.benchmark),
            None if fill_module is None else bool(fill_module.fill_uninitialized_memory),
        )

    def apply(self, torch: Any, fill_module: Any) -> None:
        torch.use_deterministic_algorithms(self.algorithms, warn_only=self.warn_only)
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        if fill_module is not None and self.fill is not None:
            fill_module.fill_uninitialized_memory = self.fill


def cost_arms(mode: str, torch: Any, on_error: Callable[[str], None],
              cap: int | None = None) -> CostArms | None:
    """The arms of the cost run, which ends by step `cap` (REPRO_GATE_MAX_STEPS) if set; None in
    any other mode, or when the plan cannot be read."""
    if mode != "cost":
        return None
    try:
        plan = Plan.from_json(os.environ.get(ENV_COST_PLAN) or "")
    except (ValueError, KeyError, TypeError) as error:
        on_error(f"cost run: no usable {ENV_COST_PLAN}: {error!r}")
        return None
    return CostArms(torch, plan, on_error, cap)


class CostArms:
    """Labels each step with its arm and switches the knobs for the next one."""

    def __init__(self, torch: Any, plan: Plan, on_error: Callable[[str], None],
                 cap: int | None = None) -> None:
        self._torch = torch
        self._plan = plan
        self._planned_block_steps = plan.block_steps
        self._cap = cap
        self._on_error = on_error
        self._warmup_times: list[float] = []  # warm-up steps that repeat an arm
        self._step_seconds: float | None = None  # one step's time, measured in the warm-up
        self._fill = _fill_module()
        self._saved: Knobs | None = None  # the training's own settings: the default arm
        self._arm = ARM_DEFAULT
        self._profile: Any = None
        self._census: dict[str, dict[str, float]] = {}
        self._errors: list[str] = []
        self._broken = False
        self._blocks: dict[int, tuple[str, list[float], float | None]] = {}  # arm, times, drain
        self._stopped_after: int | None = None  # rounds, when stopped early
        self._write_later = False  # COST_FILE is due at the end of this step
        unavailable = ARM_NO_FILL in plan.arms() and self._fill is None
        self._unavailable = [ARM_NO_FILL] if unavailable else []

    def on_step(self, record: dict[str, Any], write_json: WriteJson) -> int:
        """Label the finished step `record` and prepare the next step; never raises. Returns
        the step the run ends at: the end of the plan, or the cap if sooner."""
        if not self._broken:
            self._step(record, write_json)
        end = self._plan.end
        return end if self._cap is None else min(end, self._cap)

    def _step(self, record: dict[str, Any], write_json: WriteJson) -> None:
        step = record["step"]
        try:
            self._label(record, step)
            self._prepare(step + 1)
        except Exception as error:
            self._broken = True
            self._errors.append(f"step {step}: {error!r}")
            self._on_error(f"cost run arms at step {step}: {error!r}")
            for key in ("arm", "block", "census"):
                record.pop(key, None)
        warmup_end = step == len(self._plan.warmup)
        stopped, self._write_later = self._write_later, False
        if step == 1 or warmup_end or stopped or self._broken or self._census_done(step):
            self._write(write_json)

    def _label(self, record: dict[str, Any], step: int) -> None:
        slot = self._plan.slot(step)
        if slot is None:
            return
        record["arm"] = slot.arm
        warmup = slot.block is None and not slot.census
        if slot.block is not None:
            record["block"] = slot.block
        if slot.census:
            record["census"] = True
        if warmup and slot.arm in self._plan.warmup[:step - 1]:
            self._warmup_times.append(float(record["time"]))
        if slot.block is not None:
            self._blocks.setdefault(slot.block, (slot.arm, [], None))[1].append(
                float(record["time"]))
        if slot.last:
            drain = self._drain()
            if drain is not None:
                record["drain"] = drain
            if slot.census:
                self._stop_census(slot.arm)
            if warmup:
                self._size_blocks(drain)
            if slot.block is not None:
                self._end_block(slot.block, drain)

    def _size_blocks(self, drain: float | None) -> None:
        """At the end of the warm-up: lengthen the blocks to last `block_seconds`."""
        self._step_seconds = step_seconds(self._warmup_times, drain)
        if self._ranks() > 1:
            return  # each rank times its own steps: ranks whose plans differ would stop apart
        self._plan = self._plan.sized(self._step_seconds, self._cap)

    def _end_block(self, block: int, drain: float | None) -> None:
        """At the end of a timed block: at the end of a round, stop early if the rule says so."""
        arm, times, _ = self._blocks[block]
        self._blocks[block] = (arm, times, drain)
        size = len(set(self._plan.blocks))
        if (block + 1) % size or self._plan.stop_pairs <= 0 or self._ranks() > 1:
            return
        ratios = round_log_ratios(self._blocks, size, (block + 1) // size)
        if len(ratios) == (block + 1) // size and narrow_enough(
                ratios, self._plan.stop_pairs, self._plan.stop_width_pct):
            self._stopped_after = len(ratios)
            self._plan = self._plan.stopped_after(len(ratios))
            self._write_later = True

    def _ranks(self) -> int:
        """The process group's size (no collective: a local read), 1 without one."""
        distributed = self._torch.distributed
        if not distributed.is_available() or not distributed.is_initialized():
            return 1
        return int(distributed.get_world_size())

    def _prepare(self, step: int) -> None:
        """Set the knobs of `step`, and start the profiler at a census block's first step."""
        slot = self._plan.slot(step)
        if slot is None:
            return
        if slot.arm != self._arm:
            self._switch(slot.arm)
        if slot.census and slot.first:
            self._start_census()

    def _switch(self, arm: str) -> None:
        torch = self._torch
        if self._arm == ARM_DEFAULT:
            self._saved = Knobs.read(torch, self._fill)
        self._arm = arm
        if arm == ARM_DEFAULT:
            if self._saved is not None:
                self._saved.apply(torch, self._fill)
            return
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        if self._fill is not None and self._saved is not None:
            keep = self._saved.fill if self._saved.fill is not None else True
            self._fill.fill_uninitialized_memory = keep if arm == ARM_DETERMINISTIC else False

    def _drain(self) -> float | None:
        """Seconds spent waiting for the accelerator's queued work; None without one."""
        cuda = self._torch.cuda
        if not cuda.is_initialized():
            return None
        started = time.perf_counter()
        cuda.synchronize()
        return time.perf_counter() - started

    def _start_census(self) -> None:
        profiler = importlib.import_module("torch.profiler")
        activities = [profiler.ProfilerActivity.CPU]
        if self._torch.cuda.is_initialized():
            activities.append(profiler.ProfilerActivity.CUDA)
        if self._profile is None and not self._census:
            # A profiler still running when the interpreter exits (the training ended inside a
            # census block) aborts the process: stop it first.
            atexit.register(self._abandon_census)
        self._profile = profiler.profile(activities=activities)
        self._profile.start()

    def _abandon_census(self) -> None:
        profile, self._profile = self._profile, None
        if profile is not None:
            with contextlib.suppress(Exception):
                profile.stop()

    def _stop_census(self, arm: str) -> None:
        profile, self._profile = self._profile, None
        if profile is None:
            return
        profile.stop()
        times: dict[str, float] = {}
        for event in profile.key_averages():
            times[event.key] = times.get(event.key, 0.0) + _event_microseconds(event)
        ranked = sorted(times.items(), key=lambda item: -item[1])[:CENSUS_OPS]
        per_step = MICROSECONDS_PER_MS * self._plan.block_steps
        self._census[arm] = {name: round(value / per_step, 6) for name, value in ranked}

    def _census_done(self, step: int) -> bool:
        slot = self._plan.slot(step)
        return slot is not None and slot.census and slot.last

    def _write(self, write_json: WriteJson) -> None:
        document = {"unavailable": self._unavailable, "errors": self._errors,
                    "census": self._census, "block_steps": self._plan.block_steps,
                    "block_steps_planned": self._planned_block_steps,
                    "step_seconds": self._step_seconds,
                    "stopped_after_pairs": self._stopped_after}
        try:
            write_json(COST_FILE, document)
        except Exception as error:
            self._on_error(f"writing {COST_FILE}: {error!r}")


def step_seconds(times: list[float], drain: float | None) -> float | None:
    """One step's time from the warm-up steps that repeat an arm: their median; on an
    accelerator (a `drain` at the warm-up's end), their total with the queued work the drain
    waited for, over their count, since the host only queued them. None without such steps."""
    if not times:
        return None
    if drain is not None:
        return (sum(times) + drain) / len(times)
    return statistics.median(times)


def _fill_module() -> Any:
    """torch.utils.deterministic when it has fill_uninitialized_memory (torch >= 2.1), else None."""
    try:
        module = importlib.import_module("torch.utils.deterministic")
    except ImportError:
        return None
    return module if hasattr(module, "fill_uninitialized_memory") else None


def _event_microseconds(event: Any) -> float:
    """An op's time in a census: on the device when it ran there, else its own CPU time."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        device = getattr(event, name, None)
        if device:
            return float(device)
    return float(event.self_cpu_time_total)
