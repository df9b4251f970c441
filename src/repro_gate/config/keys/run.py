"""The keys of what runs and how the runs are compared."""

from __future__ import annotations

from typing import get_args

from repro_gate.config.keys.base import COMPARISON, RUN, ConfigKey, Kind
from repro_gate.config.model import Determinism

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("name", Kind.TEXT, "gate name (check run, comment, metrics group)",
              ("--name",), group=RUN, action_input="name",
              doc="gate name: check run, comment marker, metrics group",
              input_description="Gate name, to tell several gates in one repository apart. Empty:"
                                " the config file's name, else repro-gate.",
              input_doc="Gate name, to tell several gates of one repository apart. Default: the"
                        " config's `name`, else `repro-gate`."),
    ConfigKey("command", Kind.COMMAND,
              "training command, run by /bin/sh -c as written (&&, pipes, redirections work);"
              " or give it after `--` to run it without a shell",
              ("--command",), dest="command_line", group=RUN, metavar="CMD",
              action_input="command",
              doc="the training command: a string runs through `/bin/sh -c` as written, like a"
                  " workflow `run:` step (`&&`, pipes, redirections, `VAR=value` prefixes; in a"
                  " container the image needs `/bin/sh`); a list, or the words after `--`, runs"
                  " as is, without a shell",
              doc_default="reference training",
              doc_flag="`--command`, or after `--`",
              input_description="Training command, run by /bin/sh -c as written, like a `run:`"
                                " step (`&&`, pipes, redirections and `VAR=value` prefixes work)."
                                " Empty: the command from the config file (where a list runs"
                                " without a shell), else the embedded reference training.",
              input_doc="Training command, run by `/bin/sh -c` as written, like a `run:` step:"
                        " `python prep.py && python train.py`, pipes, redirections and"
                        " `VAR=value` prefixes work (in a container, the image needs `/bin/sh`)."
                        " Default: the config's command (a list there runs without a shell), else"
                        " the embedded reference training."),
    ConfigKey("workdir", Kind.TEXT, "directory the command runs in", ("--workdir",), group=RUN,
              action_input="working-directory",
              doc="directory the command runs in",
              input_description="Directory the training command runs in, relative to the"
                                " workspace. Empty: the config file's workdir, else the workspace"
                                " (.).",
              input_doc="Directory the training command runs in, relative to the workspace."
                        " Default: the config's `workdir`, else the workspace."),
    ConfigKey("artifacts", Kind.LIST, "glob of files to compare (repeatable)",
              ("-a", "--artifacts"), group=RUN, metavar="GLOB", action_input="artifacts",
              doc="globs of files to compare, matched in the run directory and in the run's"
                  " working copy (relative to it, as the training wrote them); a configured glob"
                  " that matches nothing is an error, which names the files the run wrote"
                  " nearest to it (five at most)",
              doc_default="everything in the run directory, and `*.pt`, `*.pth`, `*.ckpt`,"
                          " `*.safetensors`, `*.bin` the run wrote at the top of its working copy",
              input_description="Globs of files to compare in the run directory, one per line or"
                                " comma-separated.",
              input_doc="Globs of files to compare in the run directory and the run's working"
                        " copy (see [Where a training may write](#where-a-training-may-write)),"
                        " one per line or comma-separated."),
    ConfigKey("seed", Kind.INTEGER,
              "opt-in: the gate seeds random, numpy and torch with N in the deterministic runs"
              " (default: none; seeding is the training's job)",
              ("--seed",), group=RUN, metavar="N", action_input="seed",
              doc="opt-in: the gate seeds `random`, numpy and torch with N in the deterministic"
                  " runs, and every report says \"seeded by the gate (seed N)\"; none: the gate"
                  " seeds nothing ([Seeding](#seeding))",
              doc_flag="`--seed N`",
              input_description="Opt-in: the gate seeds random, numpy and torch with this integer"
                                " in the deterministic runs, and every report says \"seeded by"
                                " the gate (seed N)\". Empty (the default): the gate seeds"
                                " nothing; seeding is the training's job.",
              input_doc="Opt-in: the gate seeds `random`, numpy and torch with this integer in"
                        " the deterministic runs, and every report says \"seeded by the gate"
                        " (seed N)\". Default: the config's `seed`, else none: **the gate seeds"
                        " nothing**, seeding is the training's job, and an unseeded training that"
                        " diverges fails naming the line to add (see the README's Seeding"
                        " section). The hash seed is not seeded: runs A and B get two fixed,"
                        " different ones (`PYTHONHASHSEED` 0 and 1) unless `env` sets it."),
    ConfigKey("runs", Kind.INTEGER, "deterministic runs to compare (default {default})",
              ("--runs",), group=RUN, action_input="runs",
              doc="deterministic runs compared with run A (>= 2)",
              input_description="Number of deterministic runs compared with each other (default"
                                " 2).",
              input_doc="Number of deterministic runs (default 2)."),
    ConfigKey("timeout", Kind.NUMBER, "per-run timeout", ("--timeout",), group=RUN,
              metavar="SECONDS", action_input="timeout",
              doc="per-run timeout in seconds; kills the whole process group or the container",
              input_description="Per-run timeout in seconds; a run past it is killed.",
              input_doc="Per-run timeout in seconds; a run past it is stopped and removed."),
    ConfigKey("env", Kind.ENV, "extra environment variable for every run (repeatable)",
              ("--env",), group=RUN, metavar="KEY=VALUE",
              doc="extra environment for every run",
              doc_flag="`--env KEY=VALUE`"),
    ConfigKey("data", Kind.LIST, "data path checksummed into the fingerprint (repeatable)",
              ("--data",), group=RUN, metavar="PATH",
              doc="data paths checksummed into the fingerprint"),
    ConfigKey("allow_fork_pull_requests", Kind.BOOLEAN,
              "run code not in the base repository's history on a self-hosted runner of a"
              " public repository (refused by default; see docs/action.md)",
              ("--allow-fork-pull-requests",), group=RUN,
              action_input="allow-fork-pull-requests",
              doc="let a commit that is not in the history of the base repository's branches or"
                  " tags (a fork's) run on a self-hosted runner of a public repository"
                  " ([docs/action.md](docs/action.md#pull-requests-from-forks))",
              input_description="true runs, with a warning, a commit that is not in the history"
                                " of the base repository's branches or tags (a fork's) on a"
                                " self-hosted runner of a public repository, whatever the event,"
                                " and a fork's head checked out by pull_request_target. Empty:"
                                " the config file's allow_fork_pull_requests, else false: both"
                                " are refused before"
                                " anything runs (docs/action.md#pull-requests-from-forks).",
              input_doc="`true`: run a fork's code where the gate refuses it by default, with a"
                        " warning; see [Pull requests from forks](#pull-requests-from-forks)."
                        " Default: the config's `allow_fork_pull_requests`, else `false`."),
    ConfigKey("tolerance", Kind.TOLERANCE, "'{default}' (default) or 'atol=X,rtol=Y'",
              ("--tolerance",), group=COMPARISON, metavar="SPEC", action_input="tolerance",
              doc="numeric tolerance for artifacts, optionally per glob: a and b agree when `\\|a"
                  " - b\\| <= atol + rtol * \\|b\\|`, NaN agrees with NaN, an infinity only with"
                  " the same infinity; the trajectory stays bitwise evidence",
              doc_flag="`--tolerance atol=X,rtol=Y`",
              input_description="'bitwise' (default) or 'atol=X,rtol=Y'.",
              input_doc="`bitwise` (default) or `atol=X,rtol=Y`."),
    ConfigKey("determinism", Kind.CHOICE,
              "warn: record nondeterministic ops and go on (default); strict: such an op raises",
              ("--determinism",), group=COMPARISON, choices=get_args(Determinism),
              doc="`warn` records nondeterministic ops and goes on; `strict` makes them raise"),
    ConfigKey("fail_fast", Kind.BOOLEAN, "stop run B at its first differing step (default on)",
              ("--fail-fast",), group=COMPARISON,
              doc="stop run B at its first step that differs from run A",
              doc_flag="`--fail-fast/--no-fail-fast`"),
    ConfigKey("baseline", Kind.TEXT,
              "earlier manifest whose environment is diffed against this run",
              ("--baseline",), group=COMPARISON, metavar="MANIFEST", action_input="baseline",
              doc="earlier manifest; its environment is diffed against this run's",
              input_description="Manifest of an earlier run whose environment is diffed against"
                                " this one.",
              input_doc="Manifest of an earlier run; the environment difference is reported."),
    ConfigKey("compare.ignore", Kind.RULES,
              doc="fields of JSON/YAML artifacts that are not compared (timestamps, host names,"
                  " run ids), per artifact glob; see below",
              doc_flag="none in `check` (`repro-gate compare --ignore GLOB:FIELD[,FIELD]`)"),
)
