"""The table of configuration keys (`config/keys.py`) against every place a key shows: the
schema, the model's defaults, the flags, the action's inputs, and the regions of `action.yml`
and the docs that `config/key_docs.py` writes from it.

A key added in one of these places only fails one of these tests.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides
from repro_gate.config.key_docs import REGIONS, current, default_cell, shown
from repro_gate.config.keys import ACTION_ONLY_INPUTS, KEYS, ConfigKey, Kind, Scope
from repro_gate.config.model import ContainerConfig, default_document

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "src/repro_gate/schemas/config.schema.json").read_text())
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
PATHS = {entry.path for entry in KEYS}
# Options of `check` and `upgrade` that are not configuration keys.
COMMAND_OPTIONS = {"-h", "--help", "--config", "--wait", "--json", "-q", "--quiet", "--upgrade",
                   "--upgrade-package", "--candidate-lock", "--write-lock"}
# The JSON types the schema may give each kind of key.
SCHEMA_TYPES: dict[Kind, set[str]] = {
    Kind.TEXT: {"string"}, Kind.INTEGER: {"integer"}, Kind.NUMBER: {"number"},
    Kind.BOOLEAN: {"boolean"}, Kind.LIST: {"array"}, Kind.ENV: {"object"},
    Kind.RULES: {"array"}, Kind.CHOICE: set(),
    Kind.TOLERANCE: {"string", "object"}, Kind.GPUS: {"string", "integer", "array"},
    Kind.COMMAND: {"string", "array"},
}


def schema_leaves(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted path, schema) of every key the config file may set; sections are walked."""
    for name, child in node["properties"].items():
        path = f"{prefix}{name}"
        if "properties" in child:
            yield from schema_leaves(child, path + ".")
        else:
            yield path, child


def json_types(node: dict[str, Any]) -> set[str]:
    """The JSON types a schema node admits (through `oneOf` and a local `$ref`), null aside."""
    if "$ref" in node:
        return json_types(SCHEMA["properties"][node["$ref"].rpartition("/")[2]])
    if "oneOf" in node:
        return set().union(*(json_types(option) for option in node["oneOf"]))
    if "enum" in node:
        return {"string"}
    kinds = node.get("type", [])
    return {kinds} if isinstance(kinds, str) else set(kinds) - {"null"}


def document_leaves(document: dict[str, Any], prefix: str = "") -> set[str]:
    sections = {"compare", "cost", "reference", "container", "report", "metrics", "upgrade",
                "golden", "vary"}
    leaves: set[str] = set()
    for name, value in document.items():
        if not prefix and name in sections:
            leaves |= document_leaves(value, f"{name}.")
        else:
            leaves.add(f"{prefix}{name}")
    return leaves


def mentions(text: str, value: Any) -> bool:
    """Whether `text` names `value` as a word of its own."""
    pattern = r"(?<![\w.~-])" + re.escape(shown(value)) + r"(?![\w-])"
    words = {"true": ("true", "on"), "false": ("false", "off")}.get(shown(value))
    if words:
        return any(re.search(rf"\b{word}\b", text) for word in words)
    return re.search(pattern, text) is not None


def action_default(entry: ConfigKey) -> Any:
    """The key's default under the action's profile (a container run: the image is set)."""
    profile = Config(Path("."), Path("."), container=ContainerConfig(image="i")).in_action()
    if entry.path == "image":
        return entry.default
    value: Any = profile.as_document()
    for part in entry.path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def parser_options(command: str) -> set[str]:
    parser = build_parser()
    subparsers = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction))
    return {option for action in subparsers.choices[command]._actions
            for option in action.option_strings}


def test_the_schema_has_exactly_the_keys_of_the_table_with_their_type_and_default() -> None:
    leaves = dict(schema_leaves(SCHEMA))

    assert set(leaves) == PATHS
    for entry in KEYS:
        node = leaves[entry.path]
        assert json_types(node) <= SCHEMA_TYPES[entry.kind] or entry.kind is Kind.CHOICE, entry
        if entry.kind is Kind.CHOICE:
            assert tuple(node["enum"]) == entry.choices, entry.path
        assert node.get("default") == entry.default, entry.path


def test_every_default_of_the_model_is_a_key_of_the_table() -> None:
    assert document_leaves(default_document()) - {"config_file"} <= PATHS


@pytest.mark.parametrize("command", ["check", "upgrade"])
def test_every_option_of_a_gate_is_a_key_of_the_table_or_a_named_command_option(
    command: str,
) -> None:
    scopes = {Scope.GATE} if command == "check" else {Scope.GATE, Scope.UPGRADE}
    flags = {flag for entry in KEYS if entry.scope in scopes for flag in entry.flags}
    flags |= {"--no-" + flag[2:] for entry in KEYS if entry.kind is Kind.BOOLEAN
              and entry.scope in scopes for flag in entry.flags}

    assert parser_options(command) - COMMAND_OPTIONS == flags


SAMPLES: dict[Kind, tuple[list[str], str, Any]] = {
    # kind: (flag words after the flag, input text, value in the config document)
    Kind.TEXT: (["x"], "x", "x"),
    Kind.INTEGER: (["3"], "3", 3),
    Kind.NUMBER: (["2.5"], "2.5", 2.5),
    Kind.LIST: (["a"], "a", ["a"]),
    Kind.TOLERANCE: (["atol=1,rtol=0"], "atol=1,rtol=0", {"atol": 1.0, "rtol": 0.0}),
    Kind.GPUS: (["0,1"], "0, 1", ["0", "1"]),
    Kind.COMMAND: (["python t.py"], "python t.py", "python t.py"),
    Kind.ENV: (["K=V"], "", {"K": "V"}),
}


def sample(entry: ConfigKey) -> tuple[list[str], str, Any]:
    if entry.kind is Kind.BOOLEAN:
        return [], "true", True
    if entry.kind is Kind.CHOICE:
        return [entry.choices[-1]], entry.choices[-1], entry.choices[-1]
    return SAMPLES[entry.kind]


def at(document: dict[str, Any], entry: ConfigKey) -> Any:
    section = document.get(entry.section, {}) if entry.section else document
    return section.get(entry.name)


@pytest.mark.parametrize("entry", [entry for entry in KEYS if entry.flags],
                         ids=lambda entry: entry.path)
def test_each_flag_sets_its_key(entry: ConfigKey) -> None:
    words, _, value = sample(entry)
    command = "upgrade" if entry.scope is Scope.UPGRADE else "check"

    args = build_parser().parse_args([command, entry.flags[-1], *words])

    assert at(overrides.from_flags(args), entry) == value


@pytest.mark.parametrize("entry", [entry for entry in KEYS if entry.action_input],
                         ids=lambda entry: entry.path)
def test_each_action_input_sets_its_key_as_its_flag_does(entry: ConfigKey) -> None:
    _, text, value = sample(entry)
    assert entry.action_input is not None

    document = overrides.from_action_inputs({f"INPUT_{entry.action_input.upper()}": text})

    assert at(document, entry) == value


def test_action_yml_declares_the_inputs_of_the_table_and_the_action_only_ones() -> None:
    inputs = {entry.action_input for entry in KEYS if entry.action_input}

    assert set(ACTION["inputs"]) == inputs | set(ACTION_ONLY_INPUTS)
    assert not inputs & set(ACTION_ONLY_INPUTS)


@pytest.mark.parametrize("entry", [entry for entry in KEYS if entry.action_input],
                         ids=lambda entry: entry.path)
def test_an_input_of_action_yml_is_empty_by_default_and_its_description_names_the_default(
    entry: ConfigKey,
) -> None:
    declared = ACTION["inputs"][entry.action_input]
    default = action_default(entry)

    assert declared["default"] == "" and declared["description"].strip()
    if default is not None and not isinstance(default, list | dict):
        assert mentions(declared["description"], default), (entry.path, default)


@pytest.mark.parametrize("path", sorted({region.path for region in REGIONS}))
def test_the_generated_regions_of_a_document_are_what_the_table_makes(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")

    for region in REGIONS:
        if region.path == path:
            assert current(text, region) == region.body(), (
                f"{path}: the region {region.name!r} is stale: run scripts/generate-key-docs"
            )


@pytest.mark.parametrize("entry", [entry for entry in KEYS if entry.doc_default is not None],
                         ids=lambda entry: entry.path)
def test_a_default_written_by_hand_names_the_default_of_the_model(entry: ConfigKey) -> None:
    if entry.default is not None:
        assert mentions(default_cell(entry), entry.default), entry.path
