"""Load `.repro-gate.yml`, merge overrides, validate against the schema, and build `Config`."""

from __future__ import annotations

import copy
import math
from pathlib import Path, PureWindowsPath
from typing import Any

import yaml

from repro_gate import parsing, validation
from repro_gate.config.model import DEFAULT_OUTPUT_DIR, DEFAULT_WORKDIR, Config
from repro_gate.credentials import is_gate_credential
from repro_gate.errors import ConfigError, one_line

CONFIG_FILENAMES = (".repro-gate.yml", ".repro-gate.yaml")
# Larger numbers are mistakes (a timeout of 30 000 years) and may not fit a float.
MAX_NUMBER = 10**12


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
        text = parsing.read_text(path)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    except parsing.OverBudget as error:
        raise ConfigError(f"config file {path}: {error}") from None
    try:
        data = parsing.load_yaml(text)
    except parsing.OverBudget as error:
        raise ConfigError(f"config file {path}: {error}") from None
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
    check_artifact_globs(merged.get("artifacts") or [])
    base_dir = path.parent if path is not None else cwd
    document = resolve(merged, base_dir=base_dir.resolve(), cwd=cwd.resolve(),
                       file_keys=set(from_file), config_path=path)
    _check_workdir(Path(document["workdir"]))
    return Config.from_document(document)


def check_artifact_globs(globs: list[str]) -> None:
    """ConfigError naming the first glob that could reach outside the run, or is no glob."""
    for glob in globs:
        problem = artifact_glob_problem(glob)
        if problem:
            raise ConfigError(f"artifacts: glob {glob!r} {problem}")


def artifact_glob_problem(glob: str) -> str | None:
    """Why `glob` is not a relative pattern inside the run directory, or None when it is.

    Artifacts are read from, and moved out of, the run directory and the working directory
    only: a glob that could name a file elsewhere is refused before anything runs.
    """
    parts = glob.replace("\\", "/").split("/")
    if all(part.strip() in ("", ".") for part in parts):
        return "names no file"
    if glob.startswith(("/", "~")) or PureWindowsPath(glob).is_absolute():
        return "must be relative to the run directory (absolute paths are not allowed)"
    if ".." in parts:
        return "must stay inside the run directory ('..' is not allowed)"
    if any("**" in part and part != "**" for part in parts):
        return "is not a valid pattern ('**' must be a whole path component, as in 'ckpt/**/*.pt')"
    return None


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
    _check_numbers(config, source)
    _check_env_allow(config, source)


def resolve(
    config: dict[str, Any],
    base_dir: Path,
    cwd: Path,
    file_keys: set[str],
    config_path: Path | None,
) -> dict[str, Any]:
    """Check the command and make paths absolute; `Config` fills in the defaults."""
    effective = copy.deepcopy(config)

    def absolute(key: str, value: str) -> str:
        root = base_dir if key in file_keys else cwd
        return str((root / value).resolve())

    # A string is kept as written: the shell runs it, `&&`, pipes and all (Config.command).
    if isinstance(effective.get("command"), str) and not effective["command"].strip():
        raise ConfigError("command: must not be empty")
    effective["workdir"] = absolute("workdir", effective.get("workdir", DEFAULT_WORKDIR))
    effective["output_dir"] = absolute("output_dir",
                                       effective.get("output_dir", DEFAULT_OUTPUT_DIR))
    effective["data"] = [absolute("data", p) for p in effective.get("data", [])]
    if "baseline" in effective:
        effective["baseline"] = absolute("baseline", effective["baseline"])
    if isinstance(effective.get("golden"), str):
        effective["golden"] = {"path": effective["golden"]}
    if "path" in effective.get("golden", {}):
        effective["golden"]["path"] = absolute("golden", effective["golden"]["path"])
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


def _check_numbers(config: dict[str, Any], source: str) -> None:
    """Every number is finite, >= 0 and of a sane size: the schema's bounds let NaN through
    (each comparison with it is false), `.inf` would disable a timeout, and 10**400 cannot
    become a float."""
    for key, value in _numbers(config):
        finite = isinstance(value, int) or math.isfinite(value)
        if not finite or value < 0:
            raise ConfigError(f"{source}: {key}: must be a finite number >= 0, got {value}")
        if value > MAX_NUMBER:
            raise ConfigError(f"{source}: {key}: must be at most {MAX_NUMBER:g}")


def _numbers(value: Any, key: str = "") -> list[tuple[str, float]]:
    """(dotted key, number) of every number in a config document."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(key, value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _numbers(v, f"{key}[{i}]")]
    return []


def _check_env_allow(config: dict[str, Any], source: str) -> None:
    """The gate's own credentials never reach a training, not even when named in the config."""
    named = [("container.env_allow", name)
             for name in (config.get("container") or {}).get("env_allow") or []]
    named += [("env", name) for name in config.get("env") or {}]
    for key, name in named:
        if is_gate_credential(name):
            raise ConfigError(f"{source}: {key}: {name} is a credential of the gate"
                              " and never reaches the training (see docs/security.md)")


def _check_workdir(workdir: Path) -> None:
    """Name a missing workdir now, not as a missing command when the first run starts."""
    if not workdir.exists():
        raise ConfigError(f"workdir {workdir} does not exist")
    if not workdir.is_dir():
        raise ConfigError(f"workdir {workdir} is not a directory")
