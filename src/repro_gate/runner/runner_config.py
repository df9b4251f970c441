"""`runner.yml` -> the frozen, typed `RunnerConfig` of the runner service.

The file is checked against `schemas/runner.schema.json`, then the rules a schema cannot say
(the token file exists, no token written in the file). Every default is defined here, once.
Relative paths are resolved against the file's folder, so the service may start anywhere.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from repro_gate import validation
from repro_gate.config.loader import read_config_file
from repro_gate.errors import ConfigError

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_RUNNER_GROUP_ID = 1  # GitHub's "Default" group; the only one a repository has
DEFAULT_NAME_PREFIX = "repro-gate"
DEFAULT_WORK_ROOT = "/var/lib/repro-gate/runner"
DEFAULT_GPU_MODEL = "unknown-gpu"  # label when neither NVML nor the file names the model
# Fetch a new installation token when the current one has less than this left (they live 1 h).
DEFAULT_TOKEN_REFRESH_MARGIN = 300.0
DEFAULT_RUNNER_COMMAND = ("/home/runner/run.sh",)  # the actions/runner image's entry point
DEFAULT_RUNNER_NETWORK = "bridge"
DEFAULT_CRASH_LOOP_LIMIT = 3  # consecutive runner crashes before the slot is marked unhealthy
DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"
DEFAULT_LEFTOVER_PROCESS_WAIT = 30.0  # seconds a job's GPU processes get to exit after it ends
DEFAULT_HEALTH_RECHECK = 60.0  # seconds between health checks of an unhealthy slot
DEFAULT_DRAIN_TIMEOUT = 3600.0  # SIGTERM: seconds busy jobs get to finish
DEFAULT_METRICS_LISTEN = "0.0.0.0:9466"
DEFAULT_POOL = "default"  # the `pool` label of the service's metrics
# Slot N's subordinate IDs start at base + N * SUBORDINATE_ID_COUNT: far above where useradd
# hands out ranges (100000 onwards), so setup finds them free on most hosts.
DEFAULT_SUBORDINATE_ID_BASE = 1_000_000_000
SUBORDINATE_ID_COUNT = 65536
# Where Debian's docker.io puts the rootless launcher (not on PATH there).
DEBIAN_ROOTLESS_LAUNCHER = "/usr/share/docker.io/contrib/dockerd-rootless.sh"
ROOTLESS_LAUNCHER = "dockerd-rootless.sh"
SCHEMA = "runner"
# Keys that would put a secret in the file itself: refused with a pointer to token_file.
SECRET_KEYS = ("token", "private_key", "jwt")


class SlotSource(str, Enum):
    """Where the slots come from."""

    GPUS = "gpus"  # one per GPU NVML lists
    MIG = "mig"  # one per MIG instance (GPUs in MIG mode); whole GPUs otherwise
    UUIDS = "uuids"  # exactly the listed UUIDs


class TargetKind(str, Enum):
    """What the runners are registered with."""

    REPOSITORY = "repository"
    ORGANIZATION = "organization"


@dataclass(frozen=True)
class Target:
    """A repository (`owner/name`) or an organisation (`login`)."""

    kind: TargetKind
    name: str

    def api_path(self, suffix: str = "") -> str:
        """`/repos/o/r/actions/runners…` or `/orgs/o/actions/runners…`."""
        scope = "repos" if self.kind is TargetKind.REPOSITORY else "orgs"
        return f"/{scope}/{self.name}/actions/runners{suffix}"

    def describe(self) -> str:
        return f"{self.kind.value} {self.name}"


class EngineKind(str, Enum):
    """Which Docker engine a slot's jobs get."""

    ROOTLESS = "rootless"  # one rootless daemon per slot, under the slot's own user
    SHARED = "shared"  # the host's daemon at docker_url, behind the filter only


@dataclass(frozen=True)
class IsolationSettings:
    """How a slot's jobs are kept from the host and from other slots."""

    engine: EngineKind = EngineKind.ROOTLESS
    user_prefix: str | None = None  # None: "<name_prefix>-slot"
    subordinate_id_base: int = DEFAULT_SUBORDINATE_ID_BASE
    engine_command: str | None = None  # None: found on PATH, else Debian's place
    # OWNER/NAME: every slot serves this repository only, and its environment caches survive
    # the reset between its jobs; None: every reset removes them.
    dedicated_repository: str | None = None


@dataclass(frozen=True)
class AppAuth:
    """A GitHub App installation."""

    app_id: int
    installation_id: int
    private_key_file: Path
    refresh_margin: float = DEFAULT_TOKEN_REFRESH_MARGIN


@dataclass(frozen=True)
class TokenFileAuth:
    """A token read from a file at each use (so it can be rotated without a restart)."""

    token_file: Path


@dataclass(frozen=True)
class GitHubSettings:
    api_url: str
    target: Target
    runner_group_id: int
    labels: tuple[str, ...]
    auth: AppAuth | TokenFileAuth


@dataclass(frozen=True)
class SlotSettings:
    source: SlotSource = SlotSource.GPUS
    uuids: tuple[str, ...] = ()
    model: str | None = None


@dataclass(frozen=True)
class RunnerSettings:
    """The runner container each job cycle starts."""

    image: str  # digest-pinned: NAME@sha256:… (or a local image ID sha256:…)
    command: tuple[str, ...] = DEFAULT_RUNNER_COMMAND
    environment: tuple[tuple[str, str], ...] = ()  # extra variables, in the file's order
    network: str = DEFAULT_RUNNER_NETWORK
    crash_loop_limit: int = DEFAULT_CRASH_LOOP_LIMIT


@dataclass(frozen=True)
class HealthSettings:
    """The GPU health check before each registration."""

    allow_no_gpu: bool = False  # NVML absent: slots pass unchecked (CPU-only trials, tests)
    leftover_process_wait: float = DEFAULT_LEFTOVER_PROCESS_WAIT
    recheck_interval: float = DEFAULT_HEALTH_RECHECK


@dataclass(frozen=True)
class RunnerConfig:
    """The effective runner service configuration."""

    github: GitHubSettings
    slots: SlotSettings
    name_prefix: str
    host: str
    work_root: Path
    config_file: Path
    runner: RunnerSettings
    health: HealthSettings = HealthSettings()
    docker_url: str = DEFAULT_DOCKER_URL
    isolation: IsolationSettings = IsolationSettings()
    allowed_capabilities: frozenset[str] = frozenset()  # for the jobs' containers (the proxy)
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    metrics_listen: str | None = DEFAULT_METRICS_LISTEN  # None: no /metrics endpoint
    pool: str = DEFAULT_POOL


def load_runner_config(path: Path) -> RunnerConfig:
    """Read, validate and type `path`; every problem is one ConfigError line."""
    document = read_config_file(path)
    _refuse_secrets(document, str(path))
    problems = validation.errors(SCHEMA, document)
    if problems:
        raise ConfigError(f"{path}: {'; '.join(problems)}")
    base = path.resolve().parent
    return RunnerConfig(
        github=_github(document["github"], base, str(path)),
        slots=_slots(document.get("slots") or {}, str(path)),
        name_prefix=document.get("name_prefix", DEFAULT_NAME_PREFIX),
        host=document.get("host") or default_host(),
        work_root=base / document.get("work_root", DEFAULT_WORK_ROOT),
        config_file=path.resolve(),
        runner=_runner(document["runner"]),
        health=_health(document.get("health") or {}),
        docker_url=document.get("docker_url", DEFAULT_DOCKER_URL),
        isolation=_isolation(document.get("isolation") or {}),
        allowed_capabilities=frozenset(
            name.upper() for name in document.get("allowed_capabilities") or ()),
        drain_timeout=float(document.get("drain_timeout_seconds", DEFAULT_DRAIN_TIMEOUT)),
        metrics_listen=_metrics_listen(document),
        pool=document.get("pool", DEFAULT_POOL),
    )


def default_host() -> str:
    """This machine's short host name, cut to what a runner name allows."""
    short = socket.gethostname().split(".")[0] or "host"
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in short)[:30]


def _github(section: dict[str, Any], base: Path, source: str) -> GitHubSettings:
    if "repository" in section:
        target = Target(TargetKind.REPOSITORY, section["repository"])
    else:
        target = Target(TargetKind.ORGANIZATION, section["organization"])
    return GitHubSettings(
        api_url=section.get("api_url", DEFAULT_API_URL).rstrip("/"),
        target=target,
        runner_group_id=section.get("runner_group_id", DEFAULT_RUNNER_GROUP_ID),
        labels=tuple(section.get("labels") or ()),
        auth=_auth(section["auth"], base, source),
    )


def _auth(section: dict[str, Any], base: Path, source: str) -> AppAuth | TokenFileAuth:
    if "token_file" in section:
        token_file = _existing_file(base / section["token_file"], "github.auth.token_file", source)
        return TokenFileAuth(token_file)
    app = section["app"]
    key = _existing_file(base / app["private_key_file"], "github.auth.app.private_key_file",
                         source)
    return AppAuth(app["app_id"], app["installation_id"], key)


def _slots(section: dict[str, Any], source: str) -> SlotSettings:
    kind = SlotSource(section.get("source", SlotSource.GPUS.value))
    uuids = tuple(section.get("uuids") or ())
    if kind is SlotSource.UUIDS and not uuids:
        raise ConfigError(f"{source}: slots.uuids: is required when slots.source is 'uuids'")
    if uuids and kind is not SlotSource.UUIDS:
        raise ConfigError(f"{source}: slots.uuids: only used with slots.source 'uuids'")
    return SlotSettings(kind, uuids, section.get("model"))


def _runner(section: dict[str, Any]) -> RunnerSettings:
    environment = section.get("environment") or {}
    return RunnerSettings(
        image=section["image"],
        command=tuple(section.get("command") or DEFAULT_RUNNER_COMMAND),
        environment=tuple((str(k), str(v)) for k, v in environment.items()),
        network=section.get("network", DEFAULT_RUNNER_NETWORK),
        crash_loop_limit=section.get("crash_loop_limit", DEFAULT_CRASH_LOOP_LIMIT),
    )


def _isolation(section: dict[str, Any]) -> IsolationSettings:
    return IsolationSettings(
        engine=EngineKind(section.get("engine", EngineKind.ROOTLESS.value)),
        user_prefix=section.get("user_prefix"),
        subordinate_id_base=section.get("subordinate_id_base", DEFAULT_SUBORDINATE_ID_BASE),
        engine_command=section.get("engine_command"),
        dedicated_repository=section.get("dedicated_repository"),
    )


def _health(section: dict[str, Any]) -> HealthSettings:
    return HealthSettings(
        allow_no_gpu=section.get("allow_no_gpu", False),
        leftover_process_wait=float(section.get("leftover_process_wait_seconds",
                                                DEFAULT_LEFTOVER_PROCESS_WAIT)),
        recheck_interval=float(section.get("recheck_seconds", DEFAULT_HEALTH_RECHECK)),
    )


def _metrics_listen(document: dict[str, Any]) -> str | None:
    """`HOST:PORT` of the /metrics endpoint; `metrics: {listen: null}` turns it off."""
    metrics = document.get("metrics") or {}
    listen: str | None = metrics.get("listen", DEFAULT_METRICS_LISTEN)
    return listen


def _existing_file(path: Path, key: str, source: str) -> Path:
    if not path.is_file():
        raise ConfigError(f"{source}: {key}: {path} not found")
    return path


def _refuse_secrets(document: dict[str, Any], source: str) -> None:
    """A secret written in runner.yml ends up in backups and `ps`-free but world-readable
    places; name the right key rather than the schema's generic 'unknown key'."""
    github = document.get("github")
    auth = github.get("auth") if isinstance(github, dict) else None
    for where, section in (("github", github), ("github.auth", auth)):
        if isinstance(section, dict):
            for key in SECRET_KEYS:
                if key in section:
                    raise ConfigError(f"{source}: {where}.{key}: a secret is never written in"
                                      " runner.yml: put it in a file and name it in"
                                      " github.auth.token_file (or use github.auth.app)")
