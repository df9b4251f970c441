"""Command-line flags for every configuration key (`config.overrides.from_flags` reads them)."""

from __future__ import annotations

import argparse

from repro_gate.config.model import CostConfig, ReferenceConfig


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """Register `--config` and one flag per configuration key (flags win over the file)."""
    parser.add_argument("--config", metavar="PATH",
                        help="config file (default: .repro-gate.yml in the current directory)")
    run = parser.add_argument_group("what to run")
    run.add_argument("--name", help="gate name (check run, comment, metrics group)")
    run.add_argument("--command", dest="command_line", metavar="CMD",
                     help="training command, run by /bin/sh -c as written (&&, pipes, redirections"
                          " work); or give it after `--` to run it without a shell")
    run.add_argument("--workdir", help="directory the command runs in")
    run.add_argument("-a", "--artifacts", action="append", metavar="GLOB",
                     help="glob of files to compare (repeatable)")
    run.add_argument("--seed", type=int, metavar="N",
                     help="opt-in: the gate seeds random, numpy and torch with N in the"
                     " deterministic runs (default: none; seeding is the training's job)")
    run.add_argument("--runs", type=int, help="deterministic runs to compare (default 2)")
    run.add_argument("--timeout", type=float, metavar="SECONDS", help="per-run timeout")
    run.add_argument("--env", action="append", metavar="KEY=VALUE",
                     help="extra environment variable for every run (repeatable)")
    run.add_argument("--data", action="append", metavar="PATH",
                     help="data path checksummed into the fingerprint (repeatable)")
    run.add_argument("--allow-fork-pull-requests", action=argparse.BooleanOptionalAction,
                     default=None,
                     help="run a fork's pull request on a self-hosted runner of a public"
                          " repository (refused by default; see docs/action.md)")
    compare = parser.add_argument_group("comparison")
    compare.add_argument("--tolerance", metavar="SPEC",
                         help="'bitwise' (default) or 'atol=X,rtol=Y'")
    compare.add_argument("--determinism", choices=["warn", "strict"],
                         help="warn: record nondeterministic ops and go on (default);"
                              " strict: such an op raises")
    compare.add_argument("--fail-fast", dest="fail_fast", action=argparse.BooleanOptionalAction,
                         default=None, help="stop run B at its first differing step (default on)")
    compare.add_argument("--baseline", metavar="MANIFEST",
                         help="earlier manifest whose environment is diffed against this run")
    cost = parser.add_argument_group("cost of determinism")
    cost.add_argument("--cost", dest="cost_enabled", action=argparse.BooleanOptionalAction,
                      default=None,
                      help="measure the cost of determinism in a cost run (default on)")
    cost.add_argument("--cost-steps", type=int, metavar="N",
                      help="at most N optimizer steps in the cost run and each noise-floor run"
                           " (0: no cap)")
    cost.add_argument("--cost-warmup", type=int, metavar="N",
                      help=f"steps before the first timed block (default {CostConfig.warmup})")
    cost.add_argument("--cost-blocks", type=int, metavar="N",
                      help="timed blocks per arm, one interval unit each"
                           f" (default {CostConfig.blocks})")
    cost.add_argument("--cost-block-steps", type=int, metavar="N",
                      help=f"fewest optimizer steps per block (default {CostConfig.block_steps})")
    cost.add_argument("--cost-block-seconds", type=float, metavar="S",
                      help="lengthen blocks to last at least S seconds, 0: off"
                           f" (default {CostConfig.block_seconds:g})")
    cost.add_argument("--cost-max-width", type=float, metavar="PCT",
                      help="widest 95%% interval reported as measured, in percentage points"
                           f" (default {CostConfig.max_width_pct:g})")
    cost.add_argument("--cost-max-pct", type=float, metavar="PCT",
                      help="budget: fail when the whole 95%% interval lies above PCT")
    cost.add_argument("--cost-breakdown", action=argparse.BooleanOptionalAction, default=None,
                      help="split the cost: fill_uninitialized_memory vs deterministic kernels,"
                           " and the ops that grow most (default off)")
    cost.add_argument("--noise-floor", action=argparse.BooleanOptionalAction, default=None,
                      help="two default-mode runs, compared with each other (default off)")
    reference = parser.add_argument_group("embedded reference training (no command configured)")
    reference.add_argument("--device", choices=["auto", "cpu", "cuda"], help="device")
    reference.add_argument("--steps", type=int,
                           help=f"optimizer steps (default {ReferenceConfig.steps})")
    reference.add_argument("--batch-size", type=int, help="batch size (default 32)")
    reference.add_argument("--width", type=int, help="channels/hidden width (default 32)")
    container = parser.add_argument_group("container runs")
    container.add_argument("--image", help="training image, ideally pinned: name@sha256:…")
    container.add_argument("--gpus", help="'all', 'none', a count, or comma-separated IDs/UUIDs")
    container.add_argument("--network", help="container network (default none)")
    container.add_argument("--memory", help="container memory limit, e.g. 16g")
    container.add_argument("--pids", type=int, help="container pids limit")
    container.add_argument("--user", help="uid:gid the training runs as")
    container.add_argument("--keep", action=argparse.BooleanOptionalAction, default=None,
                           help="keep containers after the run")
    container.add_argument("--env-allow", action="append", metavar="NAME",
                           help="host variable passed into the container (repeatable)")
    report = parser.add_argument_group("reporting")
    report.add_argument("--report", dest="report_enabled", action=argparse.BooleanOptionalAction,
                        default=None, help="report to GitHub when running in Actions (default on)")
    report.add_argument("--report-status", choices=["fallback", "always", "never"],
                        help="commit status: only when a check run can't be written (default),"
                             " always, or never")
    report.add_argument("--comment", action=argparse.BooleanOptionalAction, default=None,
                        help="sticky pull-request comment (default on)")
    report.add_argument("--error-conclusion", choices=["failure", "neutral"],
                        help="check-run conclusion for the verdict error (default failure)")
    report.add_argument("--report-timeout", type=float, metavar="SECONDS",
                        help="deadline of each GitHub reporting phase, retries included"
                             " (default 30)")
    report.add_argument("--pushgateway-url", metavar="URL", help="Pushgateway for SLI metrics")
    report.add_argument("--metrics-job", metavar="JOB", help="Pushgateway job label")
    report.add_argument("--runner-slot", metavar="SLOT", help="runner slot label (bounded)")
    report.add_argument("--metrics-timeout", type=float, metavar="SECONDS",
                        help="deadline of one Pushgateway push, retries included (default 30)")
    parser.add_argument("-o", "--output-dir", help="where the manifest and runs go"
                                                   " (default repro-gate-out)")
    parser.add_argument("--wait", action="store_true",
                        help="wait for another gate using the same output directory or working"
                             " directory, instead of stopping with an error")
