"""The table of configuration keys: for each key of `.repro-gate.yml`, its flag and action input.

The command-line flags (`cli/flags.py`), the overrides read from them and from the action's
inputs (`config/overrides.py`), and the tests of `config.schema.json`, `action.yml` and the
README's table all come from `KEYS`. Defaults are not written here: `ConfigKey.default` reads
them from the config model. A new key is one entry here, its field in `config/model.py`, and
the code that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, get_args

from repro_gate.config.model import (
    Determinism,
    Device,
    ErrorConclusion,
    ReportStatus,
    default_document,
)


class Kind(Enum):
    """How a key's value is written on the command line and in an action input."""

    TEXT = "text"
    INTEGER = "integer"  # flag: type=int; input: a finite number >= 0
    NUMBER = "number"  # flag: type=float; input: a finite number >= 0
    BOOLEAN = "boolean"  # flag: --x/--no-x; input: true or false
    CHOICE = "choice"  # one of `choices`
    LIST = "list"  # flag: repeatable; input: one per line or comma-separated
    TOLERANCE = "tolerance"  # 'bitwise' or 'atol=X,rtol=Y'
    GPUS = "gpus"  # 'all', 'none', a count, or IDs/UUIDs
    ENV = "env"  # flag: repeatable KEY=VALUE
    COMMAND = "command"  # flag: --command CMD, or the words after `--`
    RULES = "rules"  # structured (compare.ignore): the config file only


class Scope(Enum):
    """Which commands take a key's flag."""

    GATE = "gate"  # `check` and `upgrade` (every gate option applies to both)
    UPGRADE = "upgrade"  # `upgrade` only


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key and the ways a user sets it.

    `help` may name `{default}`, which the flag's help fills in from the model's default.
    """

    path: str  # dotted path in the config document: `cost.blocks`
    kind: Kind
    help: str = ""
    flags: tuple[str, ...] = ()  # empty: no flag
    dest: str | None = None  # the argparse attribute; None: from the last flag
    group: str | None = None  # the help section of the flag; None: the parser's own options
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    action_input: str | None = None  # the input of action.yml; None: no input
    scope: Scope = Scope.GATE

    @property
    def default(self) -> Any:
        """The default the config model decides (None: unset)."""
        value: Any = default_document()
        for part in self.path.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    @property
    def attribute(self) -> str:
        """The argparse attribute the flag's value lands in."""
        if self.dest is not None:
            return self.dest
        return self.flags[-1].lstrip("-").replace("-", "_")

    @property
    def section(self) -> str | None:
        """The section the key sits in (`cost`), None for a top-level key."""
        head, _, rest = self.path.partition(".")
        return head if rest else None

    @property
    def name(self) -> str:
        """The key inside its section (`blocks`), or the top-level key."""
        return self.path.rpartition(".")[2]


RUN = "what to run"
COMPARISON = "comparison"
COST = "cost of determinism"
REFERENCE = "embedded reference training (no command configured)"
CONTAINER = "container runs"
REPORTING = "reporting"
UPGRADE_CHECK = "upgrade check"

# In the order of `--help`.
KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("name", Kind.TEXT, "gate name (check run, comment, metrics group)",
              ("--name",), group=RUN, action_input="name"),
    ConfigKey("command", Kind.COMMAND,
              "training command, run by /bin/sh -c as written (&&, pipes, redirections work);"
              " or give it after `--` to run it without a shell",
              ("--command",), dest="command_line", group=RUN, metavar="CMD",
              action_input="command"),
    ConfigKey("workdir", Kind.TEXT, "directory the command runs in", ("--workdir",), group=RUN,
              action_input="working-directory"),
    ConfigKey("artifacts", Kind.LIST, "glob of files to compare (repeatable)",
              ("-a", "--artifacts"), group=RUN, metavar="GLOB", action_input="artifacts"),
    ConfigKey("seed", Kind.INTEGER,
              "opt-in: the gate seeds random, numpy and torch with N in the deterministic runs"
              " (default: none; seeding is the training's job)",
              ("--seed",), group=RUN, metavar="N", action_input="seed"),
    ConfigKey("runs", Kind.INTEGER, "deterministic runs to compare (default {default})",
              ("--runs",), group=RUN, action_input="runs"),
    ConfigKey("timeout", Kind.NUMBER, "per-run timeout", ("--timeout",), group=RUN,
              metavar="SECONDS", action_input="timeout"),
    ConfigKey("env", Kind.ENV, "extra environment variable for every run (repeatable)",
              ("--env",), group=RUN, metavar="KEY=VALUE"),
    ConfigKey("data", Kind.LIST, "data path checksummed into the fingerprint (repeatable)",
              ("--data",), group=RUN, metavar="PATH"),
    ConfigKey("allow_fork_pull_requests", Kind.BOOLEAN,
              "run a fork's pull request on a self-hosted runner of a public repository"
              " (refused by default; see docs/action.md)",
              ("--allow-fork-pull-requests",), group=RUN,
              action_input="allow-fork-pull-requests"),
    ConfigKey("tolerance", Kind.TOLERANCE, "'{default}' (default) or 'atol=X,rtol=Y'",
              ("--tolerance",), group=COMPARISON, metavar="SPEC", action_input="tolerance"),
    ConfigKey("determinism", Kind.CHOICE,
              "warn: record nondeterministic ops and go on (default); strict: such an op raises",
              ("--determinism",), group=COMPARISON, choices=get_args(Determinism)),
    ConfigKey("fail_fast", Kind.BOOLEAN, "stop run B at its first differing step (default on)",
              ("--fail-fast",), group=COMPARISON),
    ConfigKey("baseline", Kind.TEXT,
              "earlier manifest whose environment is diffed against this run",
              ("--baseline",), group=COMPARISON, metavar="MANIFEST", action_input="baseline"),
    ConfigKey("compare.ignore", Kind.RULES),
    ConfigKey("cost.enabled", Kind.BOOLEAN,
              "measure the cost of determinism in a cost run (default on)",
              ("--cost",), dest="cost_enabled", group=COST),
    ConfigKey("cost.steps", Kind.INTEGER,
              "at most N optimizer steps in the cost run and each noise-floor run (0: no cap)",
              ("--cost-steps",), group=COST, metavar="N"),
    ConfigKey("cost.warmup", Kind.INTEGER, "steps before the first timed block (default {default})",
              ("--cost-warmup",), group=COST, metavar="N"),
    ConfigKey("cost.blocks", Kind.INTEGER,
              "timed blocks per arm, one interval unit each (default {default})",
              ("--cost-blocks",), group=COST, metavar="N", action_input="cost-blocks"),
    ConfigKey("cost.block_steps", Kind.INTEGER,
              "fewest optimizer steps per block (default {default})",
              ("--cost-block-steps",), group=COST, metavar="N"),
    ConfigKey("cost.block_seconds", Kind.NUMBER,
              "lengthen blocks to last at least S seconds, 0: off (default {default:g})",
              ("--cost-block-seconds",), group=COST, metavar="S",
              action_input="cost-block-seconds"),
    ConfigKey("cost.max_width_pct", Kind.NUMBER,
              "widest 95%% interval reported as measured, in percentage points"
              " (default {default:g})",
              ("--cost-max-width",), group=COST, metavar="PCT"),
    ConfigKey("cost.max_pct", Kind.NUMBER,
              "budget: fail when the whole 95%% interval lies above PCT",
              ("--cost-max-pct",), group=COST, metavar="PCT", action_input="cost-max-pct"),
    ConfigKey("cost.breakdown", Kind.BOOLEAN,
              "split the cost: fill_uninitialized_memory vs deterministic kernels, and the ops"
              " that grow most (default off)",
              ("--cost-breakdown",), group=COST, action_input="cost-breakdown"),
    ConfigKey("cost.noise_floor", Kind.BOOLEAN,
              "two default-mode runs, compared with each other (default off)",
              ("--noise-floor",), group=COST),
    ConfigKey("device", Kind.CHOICE, "device", ("--device",), group=REFERENCE,
              choices=get_args(Device)),
    ConfigKey("reference.steps", Kind.INTEGER, "optimizer steps (default {default})",
              ("--steps",), group=REFERENCE),
    ConfigKey("reference.batch_size", Kind.INTEGER, "batch size (default {default})",
              ("--batch-size",), group=REFERENCE),
    ConfigKey("reference.width", Kind.INTEGER, "channels/hidden width (default {default})",
              ("--width",), group=REFERENCE),
    ConfigKey("image", Kind.TEXT, "training image, ideally pinned: name@sha256:…",
              ("--image",), group=CONTAINER, action_input="image"),
    ConfigKey("gpus", Kind.GPUS, "'all', 'none', a count, or comma-separated IDs/UUIDs",
              ("--gpus",), group=CONTAINER, action_input="gpus"),
    ConfigKey("network", Kind.TEXT, "container network (default {default})", ("--network",),
              group=CONTAINER, action_input="network"),
    ConfigKey("container.memory", Kind.TEXT, "container memory limit, e.g. 16g", ("--memory",),
              group=CONTAINER),
    ConfigKey("container.pids", Kind.INTEGER, "container pids limit", ("--pids",),
              group=CONTAINER),
    ConfigKey("container.user", Kind.TEXT, "uid:gid the training runs as", ("--user",),
              group=CONTAINER),
    ConfigKey("container.keep", Kind.BOOLEAN, "keep containers after the run", ("--keep",),
              group=CONTAINER),
    ConfigKey("container.env_allow", Kind.LIST,
              "host variable passed into the container (repeatable)", ("--env-allow",),
              group=CONTAINER, metavar="NAME"),
    ConfigKey("report.enabled", Kind.BOOLEAN,
              "report to GitHub when running in Actions (default on)", ("--report",),
              dest="report_enabled", group=REPORTING),
    ConfigKey("report.check_run", Kind.BOOLEAN),
    ConfigKey("report.status", Kind.CHOICE,
              "commit status: only when a check run can't be written (default), always, or never",
              ("--report-status",), group=REPORTING, choices=get_args(ReportStatus)),
    ConfigKey("report.comment", Kind.BOOLEAN, "sticky pull-request comment (default on)",
              ("--comment",), group=REPORTING),
    ConfigKey("report.error_conclusion", Kind.CHOICE,
              "check-run conclusion for the verdict error (default {default})",
              ("--error-conclusion",), group=REPORTING, choices=get_args(ErrorConclusion)),
    ConfigKey("report.timeout", Kind.NUMBER,
              "deadline of each GitHub reporting phase, retries included (default {default:g})",
              ("--report-timeout",), group=REPORTING, metavar="SECONDS"),
    ConfigKey("metrics.pushgateway_url", Kind.TEXT, "Pushgateway for SLI metrics",
              ("--pushgateway-url",), group=REPORTING, metavar="URL",
              action_input="pushgateway-url"),
    ConfigKey("metrics.job", Kind.TEXT, "Pushgateway job label", ("--metrics-job",),
              group=REPORTING, metavar="JOB"),
    ConfigKey("metrics.runner_slot", Kind.TEXT, "runner slot label (bounded)", ("--runner-slot",),
              group=REPORTING, metavar="SLOT", action_input="runner-slot"),
    ConfigKey("metrics.timeout", Kind.NUMBER,
              "deadline of one Pushgateway push, retries included (default {default:g})",
              ("--metrics-timeout",), group=REPORTING, metavar="SECONDS"),
    ConfigKey("output_dir", Kind.TEXT, "where the manifest and runs go (default {default})",
              ("-o", "--output-dir"), action_input="output-dir"),
    ConfigKey("upgrade.lock", Kind.TEXT,
              "the baseline lock (default: uv.lock, else requirements.txt)", ("--lock",),
              dest="upgrade_lock", group=UPGRADE_CHECK, metavar="PATH", action_input="lock",
              scope=Scope.UPGRADE),
    ConfigKey("upgrade.inherit_site_packages", Kind.BOOLEAN,
              "layer the locked packages over this interpreter's packages (images that ship"
              " torch)", ("--inherit-site-packages",), group=UPGRADE_CHECK,
              action_input="inherit-site-packages", scope=Scope.UPGRADE),
    ConfigKey("upgrade.tolerance", Kind.TOLERANCE,
              "'bitwise' or 'atol=X,rtol=Y': how far the numerics may move (default:"
              " --tolerance)", ("--upgrade-tolerance",), group=UPGRADE_CHECK, metavar="SPEC",
              action_input="upgrade-tolerance", scope=Scope.UPGRADE),
    ConfigKey("upgrade.max_bisect_runs", Kind.INTEGER,
              "runs the culprit search may take (default {default})", ("--max-bisect-runs",),
              group=UPGRADE_CHECK, metavar="N", action_input="max-bisect-runs",
              scope=Scope.UPGRADE),
    ConfigKey("upgrade.cache_dir", Kind.TEXT, "where environments are cached", ("--env-cache",),
              dest="env_cache", group=UPGRADE_CHECK, metavar="DIR", scope=Scope.UPGRADE),
)

# The inputs of action.yml that are not configuration keys: they choose the config file, the
# mode and the upgrade's candidate, or carry the token.
ACTION_ONLY_INPUTS = ("config", "mode", "upgrade-packages", "candidate-lock", "write-lock",
                      "github-token")


def key(path: str) -> ConfigKey:
    """The key at `path`; KeyError when the table has none."""
    for entry in KEYS:
        if entry.path == path:
            return entry
    raise KeyError(path)
