"""The entries of the table of keys: a configuration key, its kind and scope, and the inputs
and flags that are not keys."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from repro_gate.config.model import default_document


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

    `help` and `doc_default` may name `{default}`, filled in from the model's default.
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
    # The docs (`config/key_docs.py` writes them into README.md, docs/upgrade.md, docs/action.md
    # and action.yml; `scripts/generate-key-docs` runs it):
    doc: str = ""  # the meaning cell of the README's row (docs/upgrade.md's for an upgrade key)
    doc_default: str | None = None  # the default cell, `{default}` filled in; None: the model's
    doc_flag: str | None = None  # the README's flag cell; None: the flags
    shares_row: bool = False  # in the README row of the key before it (whose `doc` is the row's)
    input_description: str = ""  # the input's description in action.yml
    input_doc: str = ""  # the input's meaning cell in docs/action.md

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


# The sections of `--help` the flags are grouped in.
RUN = "what to run"
COMPARISON = "comparison"
COST = "cost of determinism"
RESUME = "resume check"
REFERENCE = "embedded reference training (no command configured)"
CONTAINER = "container runs"
REPORTING = "reporting"
UPGRADE_CHECK = "upgrade check"


@dataclass(frozen=True)
class ActionOnlyInput:
    """An input of action.yml that is not a configuration key: it chooses the config file, the
    mode or the upgrade's candidate, or carries the token."""

    name: str
    description: str  # in action.yml
    doc: str  # the meaning cell in docs/action.md
    default: str  # as action.yml writes it (YAML)
    scope: Scope  # GATE: the table of docs/action.md's inputs; UPGRADE: its Upgrade mode table
    first: bool  # listed before the keys' inputs of its table (else after them)


@dataclass(frozen=True)
class UpgradeOption:
    """A flag of `upgrade` that is not a configuration key, as docs/upgrade.md's table shows it."""

    flag: str  # the flag cell
    doc: str  # the meaning cell
    first: bool  # listed before the keys' flags (else after them)
