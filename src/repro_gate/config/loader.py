"""Load `.repro-gate.yml`, merge overrides, validate against the schema, and build `Config`."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import yaml

from repro_gate import validation
from repro_gate.config.model import DEFAULT_OUTPUT_DIR, Config
from repro_gate.errors import ConfigError, one_line

CONFIG_FILENAMES = (".repro-gate.yml", ".repro-gate.yaml")

def find_config_file(directory: Path) -> Path | None:
    """The `.repro-gate.yml` in `directory`, or None."""
    for name in CONFIG_FILENAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a config file into a mapping; every problem is a one-line ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = one_line(getattr(error, "problem", None) or error)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of keys to values, not {type(data).__name__}")
    return data


def load(config_path: Path | None, overrides: dict[str, Any], cwd: Path) -> Config:
    """The effective configuration: file (explicit or found in `cwd`) < overrides < defaults.

    Relative paths in the file are resolved against the file's directory; those given on the
    command line against `cwd`.
    """
    path = config_path if config_path is not None else find_config_file(cwd)
    from_file = read_config_file(path) if path is not None else {}
    validate(from_file, source=str(path) if path else "config")
    merged = _merge(from_file, overrides)
    validate(merged, source="configuration")
    base_dir = path.parent if path is not None else cwd
    document = resolve(merged, base_dir=base_dir.resolve(), cwd=cwd.resolve(),
                       file_keys=set(from_file), config_path=path)
    return Config.from_document(document)


def recorded_section(recorded: Any, name: str, source: str) -> dict[str, Any]:
    """Section `name` of a configuration recorded in a manifest, checked like user input."""
    section = recorded.get(name) if isinstance(recorded, dict) else None
    if section is None:
        return {}
    validate({name: section}, source=f"{source}: config")
    return dict(section)


def validate(config: dict[str, Any], source: str) -> None:
    """Raise ConfigError naming the key and the rule of each violation."""
    problems = validation.errors("config", config)
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}")


def resolve(
    config: dict[str, Any],
    base_dir: Path,
    cwd: Path,
    file_keys: set[str],
    config_path: Path | None,
) -> dict[str, Any]:
    """Split a string command and make paths absolute; `Config` fills in the defaults."""
    effective = copy.deepcopy(config)

    def absolute(key: str, value: str) -> str:
        root = base_dir if key in file_keys else cwd
        return str((root / value).resolve())

    if isinstance(effective.get("command"), str):
        try:
            effective["command"] = shlex.split(effective["command"])
        except ValueError as error:
            raise ConfigError(f"command: cannot split into arguments: {error}") from None
        if not effective["command"]:
            raise ConfigError("command: must not be empty")
    effective["workdir"] = absolute("workdir", effective.get("workdir", "."))
    effective["output_dir"] = absolute("output_dir",
                                       effective.get("output_dir", DEFAULT_OUTPUT_DIR))
    effective["data"] = [absolute("data", p) for p in effective.get("data", [])]
    if "baseline" in effective:
        effective["baseline"] = absolute("baseline", effective["baseline"])
    effective["config_file"] = str(config_path.resolve()) if config_path else None
    return effective


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
