"""The cost run's design: the arm of every optimizer step, which the probe follows.

One process, determinism switched at run time between blocks of `cost.block_steps` steps
(docs/performance.md, "Cost of determinism"): after `cost.warmup` steps that rotate through the
arms (so each arm's first-use costs, such as cuDNN autotuning, fall outside the timed blocks),
`cost.blocks` rounds of one block per arm, the order reversed every other round (default, det |
det, default | ...) so that a linear drift of the machine's speed cancels over each two rounds.
With `cost.breakdown` a third arm (determinism on, fill_uninitialized_memory off) sits between
the two, and one profiled census block of the deterministic and default arms ends the run.
The plan starts in the default arm: step 1 runs before the probe can switch anything.

`block_steps` is the shortest block: at the end of the warm-up the probe times a step and
lengthens every block to last at least `cost.block_seconds` (so that a timer tick or a
preemption of a few ms cannot swing a pair), and stops the run at the end of that plan; it
records the length it used in COST_FILE, which the gate reads (cost/estimate.py).

The probe also stops the timed blocks early, at the end of a round, once the 95% interval over the
rounds so far is at most `stop_width_pct` wide (half of `cost.max_width_pct`), but never before
STOP_MIN_PAIRS rounds (fixed here, in advance: stopping on the first narrow interval would bias it
narrow); the census blocks, if any, follow at once. The rule is `estimate.narrow_enough`, which
the probe keeps a copy of (a test keeps them equal); docs/performance.md says what it costs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from repro_gate.config import CostConfig

ARM_DETERMINISTIC = "deterministic"
ARM_NO_FILL = "deterministic_no_fill"
ARM_DEFAULT = "default"
# The fewest rounds (block pairs) before the probe may stop early. In simulation (normal pair
# noise, bench/cost_early_stop.py) 8 keeps the coverage of the 95% interval at 93.6-95.1%; with 3
# or 4 it falls to about 91% where pairs vary most.
STOP_MIN_PAIRS = 8


@dataclass(frozen=True)
class CostPlan:
    """Which arm each step of the cost run is in: warm-up, timed blocks, census blocks."""

    arms: tuple[str, ...]  # as the manifest lists them: deterministic first, default last
    warmup: tuple[str, ...]  # one arm per warm-up step
    blocks: tuple[str, ...]  # one arm per timed block, round after round
    census: tuple[str, ...]  # one arm per profiled block after the timed ones
    block_steps: int  # planned, the shortest: the probe may lengthen the blocks
    rounds: int  # planned rounds: one block per arm each, so `blocks` per arm
    block_seconds: float = 0.0  # the shortest block in seconds: the probe's lengthening
    stop_pairs: int = 0  # the fewest rounds before an early stop; 0: never stop early
    stop_width_pct: float = 0.0  # stop early once the interval is at most this wide

    @property
    def timed_steps(self) -> int:
        """Steps up to the end of the last timed block, with blocks of `block_steps`."""
        return len(self.warmup) + len(self.blocks) * self.block_steps

    @property
    def steps(self) -> int:
        """Steps the cost run takes with blocks of `block_steps`, census included."""
        return self.timed_steps + len(self.census) * self.block_steps

    def to_env(self) -> str:
        """The plan as the probe reads it from REPRO_GATE_COST_PLAN."""
        return json.dumps({"warmup": list(self.warmup), "blocks": list(self.blocks),
                           "census": list(self.census), "block_steps": self.block_steps,
                           "block_seconds": self.block_seconds, "stop_pairs": self.stop_pairs,
                           "stop_width_pct": self.stop_width_pct}, separators=(",", ":"))


def plan(cost: CostConfig) -> CostPlan:
    """The design of the cost run for `cost`."""
    arms = (ARM_DETERMINISTIC, ARM_NO_FILL, ARM_DEFAULT) if cost.breakdown else (
        ARM_DETERMINISTIC, ARM_DEFAULT)
    forward = arms[::-1]  # default first
    blocks = tuple(arm for index in range(cost.blocks)
                   for arm in (forward if index % 2 == 0 else arms))
    warmup = tuple(forward[index % len(forward)] for index in range(cost.warmup))
    census = (ARM_DETERMINISTIC, ARM_DEFAULT) if cost.breakdown else ()
    stop_pairs = STOP_MIN_PAIRS if cost.blocks > STOP_MIN_PAIRS else 0
    return CostPlan(arms, warmup, blocks, census, cost.block_steps, cost.blocks,
                    float(cost.block_seconds), stop_pairs, cost.max_width_pct / 2)


def max_steps(cost: CostConfig) -> int:
    """The cap the gate sets on the cost run: `cost.steps` (0: none). The probe ends the run
    at the end of its plan, whose length only it knows (the blocks it lengthened)."""
    return cost.steps

