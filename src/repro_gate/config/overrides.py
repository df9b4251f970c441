"""User input that overrides the config file: command-line flags and the action's inputs.

Both are turned into a partial document shaped like `.repro-gate.yml`, which the loader merges
over the file and validates with the same schema.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import Any

from repro_gate.config.keys import KEYS, ConfigKey, Kind
from repro_gate.errors import ConfigError


def from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Config keys set on the command line (see `cli.flags`), shaped like the config file."""
    values: dict[str, Any] = {}
    for entry in KEYS:
        if entry.flags and (value := _flag_value(entry, args)) is not None:
            _set(values, entry, value)
    return values


def _flag_value(entry: ConfigKey, args: argparse.Namespace) -> Any:
    """The value `entry`'s flag gave, as the config file writes it; None when not given (or
    not a flag of this command)."""
    if entry.kind is Kind.COMMAND:
        trailing = [a for a in (getattr(args, "trailing_command", None) or []) if a != "--"]
        return trailing or getattr(args, entry.attribute, None)
    value = getattr(args, entry.attribute, None)
    if value is None or value == []:
        return None
    if entry.kind is Kind.TOLERANCE:
        return parse_tolerance(value)
    if entry.kind is Kind.GPUS:
        return parse_gpus(value)
    if entry.kind is Kind.ENV:
        return parse_env_pairs(value)
    return value


def from_action_inputs(environ: Mapping[str, str]) -> dict[str, Any]:
    """Config keys set through non-empty action inputs, shaped like the config file."""
    values: dict[str, Any] = {}
    for entry in KEYS:
        if entry.action_input and (text := action_input(environ, entry.action_input)):
            _set(values, entry, _input_value(entry, entry.action_input, text))
    if "gpus" not in values and (slot_gpu := environ.get("REPRO_GATE_GPUS", "").strip()):
        # A `repro-gate runner` slot: its job-started hook wrote the slot's GPU to GITHUB_ENV,
        # and the slot's Docker proxy refuses any other GPU, so it wins over the config file.
        values["gpus"] = parse_gpus(slot_gpu)
    return values


def _input_value(entry: ConfigKey, name: str, text: str) -> Any:
    """The text of input `name` as the config file writes `entry`'s value."""
    if entry.kind is Kind.INTEGER:
        return _number(f"input {name}", text, int)
    if entry.kind is Kind.NUMBER:
        return _number(f"input {name}", text, float)
    if entry.kind is Kind.BOOLEAN:
        return parse_boolean(f"input {name}", text)
    if entry.kind is Kind.LIST:
        return split_list(text)
    if entry.kind is Kind.TOLERANCE:
        return parse_tolerance(text)
    if entry.kind is Kind.GPUS:
        return parse_gpus(text)
    return text


def _set(values: dict[str, Any], entry: ConfigKey, value: Any) -> None:
    """Put `value` at `entry`'s place in the partial document `values`."""
    if entry.section is None:
        values[entry.name] = value
    else:
        values.setdefault(entry.section, {})[entry.name] = value


def parse_boolean(what: str, text: str) -> bool:
    """The text of a true/false value (any case); one-line ConfigError naming `what`."""
    if text.lower() not in ("true", "false"):
        raise ConfigError(f"{what}: must be true or false, got {text!r}")
    return text.lower() == "true"


def action_input(environ: Mapping[str, str], name: str) -> str:
    """The value of input `name` as the runner passes it (`INPUT_` + upper-cased name), trimmed."""
    return environ.get(f"INPUT_{name.replace(' ', '_').upper()}", "").strip()


def parse_tolerance(text: str) -> str | dict[str, float]:
    """`bitwise` or `atol=1e-6,rtol=1e-5`."""
    if text.strip() == "bitwise":
        return "bitwise"
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in ("atol", "rtol"):
            raise ConfigError(
                f"--tolerance: expected 'bitwise' or 'atol=X,rtol=Y', got {text!r}"
            )
        values[key] = _number(f"--tolerance: {key}", raw, float)
    return values


def parse_env_pairs(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings from repeated `--env` flags."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env: expected KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def parse_gpus(text: str) -> str | int | list[str]:
    """'all', 'none', a count, or device IDs/UUIDs separated by commas or lines."""
    text = text.strip()
    if text in ("all", "none"):
        return text
    if text.isdigit():
        return int(text)
    return split_list(text)


def split_list(text: str) -> list[str]:
    """Items given one per line or separated by commas."""
    return [part.strip() for line in text.splitlines() for part in line.split(",") if part.strip()]


def _number(what: str, text: str, kind: Callable[[str], Any]) -> Any:
    """`text` as a finite, non-negative number of `kind`; one-line ConfigError otherwise."""
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"{what}: must be a number, got {text!r}") from None
    # float() accepts "nan" and "inf", which would disable a timeout or a tolerance silently.
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what}: must be a finite number >= 0, got {text.strip()!r}")
    return value
