"""The docs written from the table of keys (`config/keys/`): the README's table of
configuration keys, the upgrade flags of docs/upgrade.md, the inputs of action.yml and the input
tables of docs/action.md.

Each sits in a region of its file between a begin and an end marker comment;
`scripts/generate-key-docs` rewrites the regions (`--check`: says which file is stale), and
`tests/config/test_keys.py` checks that each region is what the table makes. Pure functions:
the table in, text out.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from repro_gate.config.keys import (
    ACTION_ONLY,
    KEYS,
    UPGRADE_OPTIONS,
    ActionOnlyInput,
    ConfigKey,
    Kind,
    Scope,
    UpgradeOption,
)

WIDTH = 100  # action.yml's lines


@dataclass(frozen=True)
class Table:
    """What the docs are written from: the keys and the action's and upgrade's own entries."""

    keys: Sequence[ConfigKey] = KEYS
    action_only: Sequence[ActionOnlyInput] = ACTION_ONLY
    upgrade_options: Sequence[UpgradeOption] = UPGRADE_OPTIONS


def shown(value: Any) -> str:
    """A default as the docs write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def default_cell(entry: ConfigKey, shared: bool = False) -> str:
    """The key's default in a table: `doc_default`, else the model's (on/off in a shared row)."""
    if entry.doc_default is not None:
        return entry.doc_default.format(default=entry.default)
    value = entry.default
    if value is None:
        return "none"
    if shared and isinstance(value, bool):
        return "on" if value else "off"
    return f"`{shown(value)}`"


def flag_cell(entry: ConfigKey) -> str:
    """The key's flag cell in the README: `doc_flag`, else its flags (empty: none)."""
    if entry.doc_flag is not None:
        return entry.doc_flag
    return f"`{'/'.join(entry.flags)}`" if entry.flags else ""


def readme_rows(keys: Sequence[ConfigKey]) -> list[list[ConfigKey]]:
    """The keys of every gate, grouped into the README's rows (`shares_row`)."""
    rows: list[list[ConfigKey]] = []
    for entry in keys:
        if entry.scope is not Scope.GATE:
            continue
        if entry.shares_row and rows:
            rows[-1].append(entry)
        else:
            rows.append([entry])
    return rows


def readme_table(table: Table = Table()) -> str:
    """The README's table of configuration keys."""
    lines = ["| key | default | flag | meaning |", "|---|---|---|---|"]
    for row in readme_rows(table.keys):
        head = row[0]
        names = [f"`{head.path}`"] + [
            f"`.{entry.name}`" if entry.section and entry.section == head.section
            else f"`{entry.path}`" for entry in row[1:]
        ]
        shared = len(row) > 1
        defaults = ", ".join(default_cell(entry, shared) for entry in row)
        flags = ", ".join(cell for cell in map(flag_cell, row) if cell) or "none"
        lines.append(f"| {', '.join(names)} | {defaults} | {flags} | {head.doc} |")
    return "\n".join(lines) + "\n"


def upgrade_flag_cell(entry: ConfigKey) -> str:
    """An upgrade key's flag cell in docs/upgrade.md: the flag with its metavar, or both forms."""
    if not entry.flags:
        return "none"
    flag = entry.flags[-1]
    if entry.kind is Kind.BOOLEAN:
        return f"`{flag}` / `--no-{flag[2:]}`"
    return f"`{flag} {entry.metavar}`" if entry.metavar else f"`{flag}`"


def upgrade_table(table: Table = Table()) -> str:
    """docs/upgrade.md's table of the upgrade's flags: its own options and its keys."""
    lines = ["| flag | config key (`upgrade:`) | default | meaning |", "|---|---|---|---|"]
    options = [(option.flag, option.doc) for option in table.upgrade_options if option.first]
    lines += [f"| {flag} | | | {doc} |" for flag, doc in options]
    for entry in table.keys:
        if entry.scope is Scope.UPGRADE:
            lines.append(f"| {upgrade_flag_cell(entry)} | `{entry.name}` | "
                         f"{default_cell(entry)} | {entry.doc} |")
    options = [(option.flag, option.doc) for option in table.upgrade_options if not option.first]
    lines += [f"| {flag} | | | {doc} |" for flag, doc in options]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Input:
    """An input of action.yml, a key's or the action's own."""

    name: str
    description: str
    doc: str
    default: str  # YAML


def inputs(table: Table, scope: Scope) -> list[Input]:
    """The inputs of one table of docs/action.md: the action's own first ones, the keys', then
    the action's own others."""
    own = [entry for entry in table.action_only if entry.scope is scope]

    def of(entries: list[ActionOnlyInput]) -> list[Input]:
        return [Input(entry.name, entry.description, entry.doc, entry.default)
                for entry in entries]

    keyed = [Input(entry.action_input, entry.input_description, entry.input_doc, '""')
             for entry in table.keys if entry.scope is scope and entry.action_input]
    return (of([entry for entry in own if entry.first]) + keyed
            + of([entry for entry in own if not entry.first]))


def inputs_table(table: Table = Table(), scope: Scope = Scope.GATE) -> str:
    """A table of docs/action.md: the gate's inputs (GATE), or the upgrade's (UPGRADE)."""
    lines = ["| Input | Meaning |", "|---|---|"]
    lines += [f"| `{entry.name}` | {entry.doc} |" for entry in inputs(table, scope)]
    return "\n".join(lines) + "\n"


def plain(text: str) -> bool:
    """Whether YAML reads `text` as written, as a plain scalar."""
    try:
        return bool(yaml.safe_load(f"key: {text}") == {"key": text})
    except yaml.YAMLError:
        return False


def description(text: str) -> list[str]:
    """The `description:` of an input: on its line when it fits, else a folded block."""
    line = f"    description: {text if plain(text) else json.dumps(text, ensure_ascii=False)}"
    if len(line) <= WIDTH:
        return [line]
    return ["    description: >-", *textwrap.wrap(text, WIDTH, initial_indent=" " * 6,
                                                  subsequent_indent=" " * 6,
                                                  break_long_words=False,
                                                  break_on_hyphens=False)]


def action_inputs(table: Table = Table()) -> str:
    """The inputs of action.yml: the gate's, then the upgrade's."""
    lines: list[str] = []
    for entry in inputs(table, Scope.GATE) + inputs(table, Scope.UPGRADE):
        lines += [f"  {entry.name}:", *description(entry.description), "    required: false",
                  f"    default: {entry.default}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Region:
    """A generated region of a file, between its begin and end marker comments."""

    path: str  # relative to the repository
    name: str
    make: Callable[[Table], str]

    @property
    def markdown(self) -> bool:
        return self.path.endswith(".md")

    @property
    def begin(self) -> str:
        text = f"begin generated: {self.name} (scripts/generate-key-docs writes it)"
        return f"<!-- {text} -->\n" if self.markdown else f"  # {text}\n"

    @property
    def end(self) -> str:
        text = f"end generated: {self.name}"
        return f"<!-- {text} -->\n" if self.markdown else f"  # {text}\n"

    def body(self, table: Table = Table()) -> str:
        """What goes between the markers (a Markdown table stands between blank lines)."""
        text = self.make(table)
        return f"\n{text}\n" if self.markdown else text


REGIONS: tuple[Region, ...] = (
    Region("README.md", "configuration keys", readme_table),
    Region("docs/upgrade.md", "upgrade flags", upgrade_table),
    Region("docs/action.md", "inputs", lambda table: inputs_table(table, Scope.GATE)),
    Region("docs/action.md", "upgrade inputs", lambda table: inputs_table(table, Scope.UPGRADE)),
    Region("action.yml", "inputs", action_inputs),
)


def span(text: str, region: Region) -> tuple[int, int]:
    """Where the region's body sits in `text`; ValueError without exactly one pair of markers."""
    if text.count(region.begin) != 1 or text.count(region.end) != 1:
        raise ValueError(f"{region.path}: no single pair of markers for {region.name!r}")
    start = text.index(region.begin) + len(region.begin)
    end = text.index(region.end)
    if end < start:
        raise ValueError(f"{region.path}: the end marker of {region.name!r} comes first")
    return start, end


def current(text: str, region: Region) -> str:
    """The region's body as `text` has it."""
    start, end = span(text, region)
    return text[start:end]


def rewritten(text: str, region: Region, table: Table = Table()) -> str:
    """`text` with the region's body made from the table."""
    start, end = span(text, region)
    return text[:start] + region.body(table) + text[end:]
