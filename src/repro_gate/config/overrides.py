"""User input that overrides the config file: command-line flags and the action's inputs.

Both are turned into a partial document shaped like `.repro-gate.yml`, which the loader merges
over the file and validates with the same schema.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import Any

from repro_gate.errors import ConfigError

# Flags whose value goes to the top-level key of the same name.
TOP_LEVEL_FLAGS = ("name", "workdir", "artifacts", "seed", "runs", "timeout", "data",
                   "determinism", "fail_fast", "baseline", "device", "image", "network",
                   "output_dir", "allow_fork_pull_requests")
# (section, key, flag attribute) for flags that set a key inside a section.
SECTION_FLAGS = (
    ("cost", "enabled", "cost_enabled"), ("cost", "steps", "cost_steps"),
    ("cost", "warmup", "cost_warmup"), ("cost", "noise_floor", "noise_floor"),
    ("cost", "blocks", "cost_blocks"), ("cost", "block_steps", "cost_block_steps"),
    ("cost", "block_seconds", "cost_block_seconds"),
    ("cost", "max_width_pct", "cost_max_width"), ("cost", "max_pct", "cost_max_pct"),
    ("cost", "breakdown", "cost_breakdown"),
    ("reference", "steps", "steps"), ("reference", "batch_size", "batch_size"),
    ("reference", "width", "width"),
    ("container", "memory", "memory"), ("container", "pids", "pids"),
    ("container", "user", "user"), ("container", "keep", "keep"),
    ("container", "env_allow", "env_allow"),
    ("report", "enabled", "report_enabled"), ("report", "status", "report_status"),
    ("report", "comment", "comment"), ("report", "error_conclusion", "error_conclusion"),
    ("report", "timeout", "report_timeout"),
    ("metrics", "pushgateway_url", "pushgateway_url"), ("metrics", "job", "metrics_job"),
    ("metrics", "runner_slot", "runner_slot"), ("metrics", "timeout", "metrics_timeout"),
)
# (key of `upgrade`, flag attribute): flags of `repro-gate upgrade` only.
UPGRADE_FLAGS = (("lock", "upgrade_lock"), ("inherit_site_packages", "inherit_site_packages"),
                 ("max_bisect_runs", "max_bisect_runs"), ("cache_dir", "env_cache"))
# Action inputs (action.yml) whose text goes unchanged to a top-level key.
TEXT_INPUTS = {"name": "name", "image": "image", "baseline": "baseline", "network": "network",
               "output-dir": "output_dir", "working-directory": "workdir", "command": "command"}


def from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Config keys set on the command line (see `cli.flags`), shaped like the config file."""
    values: dict[str, Any] = {}
    trailing = [a for a in (getattr(args, "trailing_command", None) or []) if a != "--"]
    command = trailing or args.command_line
    if command is not None:
        values["command"] = command
    for key in TOP_LEVEL_FLAGS:
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    if args.tolerance is not None:
        values["tolerance"] = parse_tolerance(args.tolerance)
    if args.env:
        values["env"] = parse_env_pairs(args.env)
    if args.gpus is not None:
        values["gpus"] = parse_gpus(args.gpus)
    for section, key, attribute in SECTION_FLAGS:
        if getattr(args, attribute) is not None:
            values.setdefault(section, {})[key] = getattr(args, attribute)
    for key, attribute in UPGRADE_FLAGS:
        if getattr(args, attribute, None) is not None:
            values.setdefault("upgrade", {})[key] = getattr(args, attribute)
    if getattr(args, "upgrade_tolerance", None) is not None:
        values.setdefault("upgrade", {})["tolerance"] = parse_tolerance(args.upgrade_tolerance)
    return values


def from_action_inputs(environ: Mapping[str, str]) -> dict[str, Any]:
    """Config keys set through non-empty action inputs, shaped like the config file."""
    values: dict[str, Any] = {}
    for input_name, key in TEXT_INPUTS.items():
        if text := action_input(environ, input_name):
            values[key] = text
    if artifacts := action_input(environ, "artifacts"):
        values["artifacts"] = split_list(artifacts)
    if runs := action_input(environ, "runs"):
        values["runs"] = _number("input runs", runs, int)
    if seed := action_input(environ, "seed"):
        values["seed"] = _number("input seed", seed, int)
    if timeout := action_input(environ, "timeout"):
        values["timeout"] = _number("input timeout", timeout, float)
    if tolerance := action_input(environ, "tolerance"):
        values["tolerance"] = parse_tolerance(tolerance)
    if gpus := action_input(environ, "gpus"):
        values["gpus"] = parse_gpus(gpus)
    elif slot_gpu := environ.get("REPRO_GATE_GPUS", "").strip():
        # A `repro-gate runner` slot: its job-started hook wrote the slot's GPU to GITHUB_ENV,
        # and the slot's Docker proxy refuses any other GPU, so it wins over the config file.
        values["gpus"] = parse_gpus(slot_gpu)
    if url := action_input(environ, "pushgateway-url"):
        values.setdefault("metrics", {})["pushgateway_url"] = url
    if slot := action_input(environ, "runner-slot"):
        values.setdefault("metrics", {})["runner_slot"] = slot
    if allow := action_input(environ, "allow-fork-pull-requests"):
        values["allow_fork_pull_requests"] = _boolean("allow-fork-pull-requests", allow)
    values.update(_cost_inputs(environ))
    values.update(_upgrade_inputs(environ))
    return values


def _cost_inputs(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `cost` keys set by the inputs cost-max-pct, cost-blocks, cost-block-seconds and
    cost-breakdown."""
    cost: dict[str, Any] = {}
    if budget := action_input(environ, "cost-max-pct"):
        cost["max_pct"] = _number("input cost-max-pct", budget, float)
    if blocks := action_input(environ, "cost-blocks"):
        cost["blocks"] = _number("input cost-blocks", blocks, int)
    if seconds := action_input(environ, "cost-block-seconds"):
        cost["block_seconds"] = _number("input cost-block-seconds", seconds, float)
    if breakdown := action_input(environ, "cost-breakdown"):
        if breakdown.lower() not in ("true", "false"):
            raise ConfigError(f"input cost-breakdown: must be true or false, got {breakdown!r}")
        cost["breakdown"] = breakdown.lower() == "true"
    return {"cost": cost} if cost else {}


def _upgrade_inputs(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `upgrade` keys set by the inputs lock, inherit-site-packages, upgrade-tolerance and
    max-bisect-runs (the mode's other inputs choose the candidate, not the configuration)."""
    upgrade: dict[str, Any] = {}
    if lock := action_input(environ, "lock"):
        upgrade["lock"] = lock
    if inherit := action_input(environ, "inherit-site-packages"):
        if inherit.lower() not in ("true", "false"):
            raise ConfigError(
                f"input inherit-site-packages: must be true or false, got {inherit!r}")
        upgrade["inherit_site_packages"] = inherit.lower() == "true"
    if tolerance := action_input(environ, "upgrade-tolerance"):
        upgrade["tolerance"] = parse_tolerance(tolerance)
    if runs := action_input(environ, "max-bisect-runs"):
        upgrade["max_bisect_runs"] = _number("input max-bisect-runs", runs, int)
    return {"upgrade": upgrade} if upgrade else {}


def _boolean(name: str, text: str) -> bool:
    """The text of a true/false input (any case); one-line ConfigError otherwise."""
    if text.lower() not in ("true", "false"):
        raise ConfigError(f"input {name}: must be true or false, got {text!r}")
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
