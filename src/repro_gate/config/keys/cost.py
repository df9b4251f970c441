"""The keys of the cost of determinism and of the embedded reference training."""

from __future__ import annotations

from typing import get_args

from repro_gate.config.keys.base import COST, REFERENCE, ConfigKey, Kind
from repro_gate.config.model import Device

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("cost.enabled", Kind.BOOLEAN,
              "measure the cost of determinism in a cost run (default on)",
              ("--cost",), dest="cost_enabled", group=COST,
              doc="measure the cost of determinism in a cost run"
                  " ([above](#the-cost-of-determinism))",
              doc_flag="`--cost/--no-cost`"),
    ConfigKey("cost.steps", Kind.INTEGER,
              "at most N optimizer steps in the cost run and each noise-floor run (0: no cap)",
              ("--cost-steps",), group=COST, metavar="N",
              doc="at most N optimizer steps in the cost run and in each noise-floor run (0: no"
                  " cap)"),
    ConfigKey("cost.warmup", Kind.INTEGER, "steps before the first timed block (default {default})",
              ("--cost-warmup",), group=COST, metavar="N",
              doc="steps before the first timed block; the median of those that repeat an arm"
                  " sizes the blocks"),
    ConfigKey("cost.blocks", Kind.INTEGER,
              "timed blocks per arm, one interval unit each (default {default})",
              ("--cost-blocks",), group=COST, metavar="N", action_input="cost-blocks",
              doc="timed blocks per arm (each round of one block per arm is one unit of the"
                  " interval; at least 3) and optimizer steps per block: the cost run takes"
                  " `warmup + blocks x arms x block_steps` steps (with the breakdown, two census"
                  " blocks more), or stops after 8 rounds or more once the interval is half"
                  " `cost.max_width_pct` wide",
              input_description="Timed blocks per arm of the cost run (each round of one block"
                                " per arm is one unit of the 95% interval). Empty: the config"
                                " file's cost.blocks, else 16.",
              input_doc="Timed blocks per arm of the cost run; each round of one block per arm is"
                        " one unit of the 95% interval. Default: the config's `cost.blocks`, else"
                        " 16."),
    ConfigKey("cost.block_steps", Kind.INTEGER,
              "fewest optimizer steps per block (default {default})",
              ("--cost-block-steps",), group=COST, metavar="N",
              shares_row=True),
    ConfigKey("cost.block_seconds", Kind.NUMBER,
              "lengthen blocks to last at least S seconds, 0: off (default {default:g})",
              ("--cost-block-seconds",), group=COST, metavar="S",
              action_input="cost-block-seconds",
              doc="shortest time a block lasts: after the warm-up the probe lengthens blocks of"
                  " quick steps to at least this (0: never); a timer tick or a preemption of a"
                  " few ms must not swing a pair. Multi-process trainings keep `block_steps`",
              input_description="Shortest duration of a timed block of the cost run, in seconds:"
                                " blocks of quick steps are lengthened to it. Empty: the config"
                                " file's cost.block_seconds, else 0.25.",
              input_doc="Shortest duration of a timed block, in seconds: blocks of quick steps"
                        " are lengthened to it. Default: the config's `cost.block_seconds`, else"
                        " 0.25."),
    ConfigKey("cost.max_width_pct", Kind.NUMBER,
              "widest 95%% interval reported as measured, in percentage points"
              " (default {default:g})",
              ("--cost-max-width",), group=COST, metavar="PCT",
              doc="widest 95% interval, in percentage points, reported as measured; wider is"
                  " inconclusive"),
    ConfigKey("cost.max_pct", Kind.NUMBER,
              "budget: fail when the whole 95%% interval lies above PCT",
              ("--cost-max-pct",), group=COST, metavar="PCT", action_input="cost-max-pct",
              doc="budget in percent: the gate fails (`cost_over_budget`) when the whole interval"
                  " lies above it",
              input_description="Budget for the cost of determinism, in percent: the gate fails"
                                " (cost_over_budget) when the whole 95% interval lies above it."
                                " Empty: the config file's cost.max_pct, else no budget.",
              input_doc="Budget for the cost of determinism, in percent: the gate fails"
                        " (`cost_over_budget`, exit code 1) when the whole 95% interval lies"
                        " above it. Default: the config's `cost.max_pct`, else no budget."),
    ConfigKey("cost.breakdown", Kind.BOOLEAN,
              "split the cost: fill_uninitialized_memory vs deterministic kernels, and the ops"
              " that grow most (default off)",
              ("--cost-breakdown",), group=COST, action_input="cost-breakdown",
              doc="a third arm without `fill_uninitialized_memory`, and an op census: where the"
                  " cost comes from",
              input_description="true: split the cost into filling uninitialised memory and"
                                " deterministic kernels, and name the ops that grow most. Empty:"
                                " the config file's cost.breakdown, else false.",
              input_doc="`true`: split the cost into filling uninitialised memory and"
                        " deterministic kernels, and name the ops that grow most. Default: the"
                        " config's `cost.breakdown`, else `false`."),
    ConfigKey("cost.noise_floor", Kind.BOOLEAN,
              "two default-mode runs, compared with each other (default off)",
              ("--noise-floor",), group=COST,
              doc="two default-mode runs besides the cost run, compared with each other: the"
                  " nondeterminism determinism removes (meaningful on GPUs)"),
    ConfigKey("device", Kind.CHOICE, "device", ("--device",), group=REFERENCE,
              choices=get_args(Device),
              doc="device of the reference training (`cpu`, `cuda`)"),
    ConfigKey("reference.steps", Kind.INTEGER, "optimizer steps (default {default})",
              ("--steps",), group=REFERENCE,
              doc="sizes of the reference training"),
    ConfigKey("reference.batch_size", Kind.INTEGER, "batch size (default {default})",
              ("--batch-size",), group=REFERENCE,
              shares_row=True),
    ConfigKey("reference.width", Kind.INTEGER, "channels/hidden width (default {default})",
              ("--width",), group=REFERENCE,
              shares_row=True),
)
