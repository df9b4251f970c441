"""Load the JSON Schemas shipped in `schemas/` and turn validation errors into one-line messages.

The schema files carry no `$id`; they refer to each other by file name (`"$ref":
"fingerprint.schema.json"`), so standard tools resolve the references against the file's own
location. Here each schema is registered under its file name, the same relative URI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from repro_gate.suggestions import did_you_mean

SCHEMA_PACKAGE = "repro_gate.schemas"
SUFFIX = ".schema.json"


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


# JSON Schema counts 2.0 as an integer; what we read and write must be a real int (`runs: 2.0`
# would otherwise reach `range()`).
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


@cache
def _registry() -> Registry:
    """Every schema file, keyed (and given an in-memory `$id`) by its file name."""
    found = []
    for entry in resources.files(SCHEMA_PACKAGE).iterdir():
        if entry.name.endswith(SUFFIX):
            document = json.loads(entry.read_text(encoding="utf-8"))
            document["$id"] = entry.name
            resource = Resource.from_contents(document, default_specification=DRAFT202012)
            found.append((entry.name, resource))
    return Registry().with_resources(found)


def load(name: str) -> dict[str, Any]:
    """Return the schema called `name` (`config`, `manifest`, ...), `$id` set to its file name."""
    schema: dict[str, Any] = _registry().contents(name + SUFFIX)
    return schema


def errors(name: str, instance: Any) -> list[str]:
    """Validate `instance` against schema `name`; return one readable line per problem."""
    # JSON has string keys only, so the schemas cannot reject others; YAML (`1: x`) has them.
    keys = list(_non_string_keys(instance, []))
    if keys:
        return keys
    validator = Validator(load(name), registry=_registry())
    found = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [describe_error(error) for error in found]


def _non_string_keys(instance: Any, path: list[Any]) -> Iterator[str]:
    if isinstance(instance, dict):
        for key, value in instance.items():
            if not isinstance(key, str):
                yield f"{_path(path) or '(top level)'}: key {key!r} must be a string"
            else:
                yield from _non_string_keys(value, [*path, key])
    elif isinstance(instance, list):
        for index, value in enumerate(instance):
            yield from _non_string_keys(value, [*path, index])


def describe_error(error: jsonschema.ValidationError) -> str:
    """`runs: must be an integer >= 2` style message for one validation error."""
    where = _path(error.absolute_path) or "(top level)"
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return f"{_join(where, missing)}: is required"
    # A failed keyword's schema is a mapping (a boolean schema fails only with "False schema").
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = list(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known), key=str)
        named = ", ".join(f"{key!r}{did_you_mean(str(key), known)}" for key in extra)
        return f"{where}: unknown key {named}"
    return f"{where}: must be {rule(schema)}"


def rule(schema: Mapping[str, Any]) -> str:
    """Describe in words what a (sub)schema accepts."""
    if "x-rule" in schema:
        return str(schema["x-rule"])
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return " or ".join(rule(option) for option in schema[combinator])
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type", "a value")
    words: dict[Any, str] = {
        "integer": "an integer",
        "number": "a number",
        "string": "a string",
        "boolean": "true or false",
        "object": "a mapping",
        "array": "a list",
        "null": "null",
    }
    text = " or ".join(str(words.get(k, k)) for k in kind) if isinstance(kind, list) else words.get(
        kind, kind
    )
    if kind == "array" and "items" in schema:
        text = f"a list of {_plural(rule(schema['items']))}"
    if "minimum" in schema and "maximum" in schema:
        return f"{text} from {schema['minimum']} to {schema['maximum']}"
    bounds = [
        (">=", "minimum"),
        (">", "exclusiveMinimum"),
        ("<=", "maximum"),
        ("<", "exclusiveMaximum"),
    ]
    for symbol, key in bounds:
        if key in schema:
            text += f" {symbol} {schema[key]}"
    if "minLength" in schema and schema["minLength"] > 0:
        text = "a non-empty string"
    if "minItems" in schema and schema["minItems"] > 0 and kind == "array":
        text = "a non-empty " + text.removeprefix("a ")
    return text


def _plural(text: str) -> str:
    for article in ("an ", "a "):
        if text.startswith(article):
            head, _, last = text.removeprefix(article).rpartition(" ")
            return f"{head} {last}s".strip()
    return text


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(where: str, key: str) -> str:
    return key if where == "(top level)" else f"{where}.{key}"
