"""The effective configuration: frozen, typed sections, each default defined here once.

`config.schema.json` validates what the user wrote; `Config.from_document` turns a validated,
resolved document into these sections, and `Config.as_document` gives back the document the
manifest records. Consumers take their section and never parse a mapping themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from repro_gate.config.vary import OnChange, VaryConfig

DEFAULT_NAME = "repro-gate"
DEFAULT_WORKDIR = "."
DEFAULT_OUTPUT_DIR = "repro-gate-out"
DEFAULT_PIDS_LIMIT = 4096
# Deadlines of publishing, retries included (docs/security.md): GitHub reporting gets one per
# phase (the start of the runs, the end), a Pushgateway push one per push.
DEFAULT_REPORT_TIMEOUT = 30.0
DEFAULT_METRICS_TIMEOUT = 30.0
# Where `repro-gate upgrade` keeps the environments it builds from locks (reused across runs).
DEFAULT_ENV_CACHE = "~/.cache/repro-gate/envs"
# Collected when `artifacts` is not configured: everything the run wrote into its run directory,
# and checkpoint-like files it wrote at the top of its working copy.
DEFAULT_RUN_DIR_GLOBS = ("**/*",)
DEFAULT_WORKDIR_GLOBS = ("*.pt", "*.pth", "*.ckpt", "*.safetensors", "*.bin")
# The metrics group of a run whose `metrics.runner_slot` is unset and that no runner slot set.
DEFAULT_RUNNER_SLOT = "default"
# The action's profile: the action is meant for GPU runners, so a container run takes them all.
ACTION_GPUS = "all"
# Where the golden trajectories live, relative to the workdir: one file per machine class.
DEFAULT_GOLDEN_PATH = ".repro-gate/golden/"

Device = Literal["auto", "cpu", "cuda"]
Determinism = Literal["warn", "strict"]
ReportStatus = Literal["fallback", "always", "never"]
ErrorConclusion = Literal["failure", "neutral"]
Gpus = str | int | tuple[str, ...]  # "all", "none", a count, or device IDs/UUIDs
# The training command as the user gave it: a string runs through `/bin/sh -c` (like a
# workflow `run:` step), an argv list runs as is, without a shell.
Command = str | tuple[str, ...]


@dataclass(frozen=True)
class ArtifactTolerance:
    """A `tolerance.per_artifact` entry: bounds for artifacts matching `glob`."""

    glob: str
    atol: float | None = None  # None: the top-level value
    rtol: float | None = None


@dataclass(frozen=True)
class ToleranceConfig:
    """`tolerance`: bitwise, or |a - b| <= atol + rtol * |b| with per-artifact overrides."""

    bitwise: bool = True
    atol: float = 0.0
    rtol: float = 0.0
    per_artifact: tuple[ArtifactTolerance, ...] = ()

    @classmethod
    def from_document(cls, value: str | dict[str, Any] | None) -> ToleranceConfig:
        """From the config value: `"bitwise"` or `{atol, rtol, per_artifact}`."""
        if value is None or isinstance(value, str):  # the schema allows only "bitwise"
            return cls()
        entries = tuple(ArtifactTolerance(**entry) for entry in value.get("per_artifact", []))
        return cls(False, float(value.get("atol", 0.0)), float(value.get("rtol", 0.0)), entries)

    def as_document(self) -> str | dict[str, Any]:
        """The config value this section was read from (defaults filled in)."""
        if self.bitwise:
            return "bitwise"
        document: dict[str, Any] = {"atol": self.atol, "rtol": self.rtol}
        if self.per_artifact:
            document["per_artifact"] = [_present(entry) for entry in self.per_artifact]
        return document


@dataclass(frozen=True)
class IgnoreRule:
    """A `compare.ignore` entry: key paths not compared in JSON/YAML artifacts matching `glob`."""

    glob: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class CompareConfig:
    """`compare`: fields left out of the comparison (volatile values such as timestamps)."""

    ignore: tuple[IgnoreRule, ...] = ()

    @classmethod
    def from_document(cls, value: dict[str, Any] | None) -> CompareConfig:
        """From the config value `{ignore: [{glob, fields}]}`."""
        rules = (value or {}).get("ignore", [])
        return cls(tuple(IgnoreRule(rule["glob"], tuple(rule["fields"])) for rule in rules))

    def as_document(self) -> dict[str, Any]:
        """The config value this section was read from."""
        return {"ignore": [{"glob": rule.glob, "fields": list(rule.fields)}
                           for rule in self.ignore]}


@dataclass(frozen=True)
class CostConfig:
    """`cost`: the cost run that prices determinism (docs/performance.md, "Cost of determinism").

    One process alternates blocks of `block_steps` steps with determinism on and off, `blocks`
    blocks per arm after `warmup` steps; the probe lengthens the blocks so that each lasts at
    least `block_seconds`; `steps` caps that run (and the noise-floor runs).
    """

    enabled: bool = True
    steps: int = 0  # at most this many steps per cost or noise-floor run; 0: no cap
    # 5: after each arm's first step, 3 steps (2 with the breakdown) remain to size blocks by
    warmup: int = 5
    noise_floor: bool = False
    block_steps: int = 4  # at least this many steps per block
    block_seconds: float = 0.25  # each block lasts at least this long (0: `block_steps` only)
    blocks: int = 16  # per arm: each round of one block per arm is one unit of the interval
    max_width_pct: float = 20.0  # a wider 95% interval (percentage points) is inconclusive
    max_pct: float | None = None  # the budget; None: no budget
    breakdown: bool = False  # a third arm without fill_uninitialized_memory, and an op census


@dataclass(frozen=True)
class ResumeConfig:
    """`resume`: run R stops after its first checkpoint written at or after optimizer step
    `after`, and `command` (None: the training's own) resumes it (docs/resume.md)."""

    after: int
    command: str | None = None  # run by /bin/sh -c, like a string `command`

    @classmethod
    def from_document(cls, value: dict[str, Any] | None) -> ResumeConfig | None:
        """From the config value `{after, command}`; None when the check is not configured."""
        if not value or value.get("after") is None:
            return None
        return cls(int(value["after"]), value.get("command") or None)

    def as_document(self) -> dict[str, Any]:
        """The config value this section was read from (an unset command left out)."""
        return _present(self)


@dataclass(frozen=True)
class ReferenceConfig:
    """`reference` (and `device`): the embedded training used when no command is configured."""

    steps: int = 80  # runs A and B; the cost run has its own count (cost/plan.py)
    batch_size: int = 32
    width: int = 32
    device: Device = "auto"


@dataclass(frozen=True)
class ContainerConfig:
    """`image`, `gpus`, `network` and `container`: how a container run is started."""

    image: str | None = None  # None: runs are local subprocesses
    gpus: Gpus | None = None  # None: no GPU, except in the action, which takes them all
    network: str = "none"
    memory: str | None = None
    pids: int = DEFAULT_PIDS_LIMIT
    user: str | None = None  # None: the workspace owner, or nobody when that is root
    keep: bool = False
    env_allow: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportConfig:
    """`report`: what is posted to GitHub."""

    enabled: bool = True
    check_run: bool = True
    status: ReportStatus = "fallback"
    comment: bool = True
    error_conclusion: ErrorConclusion = "failure"
    timeout: float = DEFAULT_REPORT_TIMEOUT  # seconds per phase, retries included


@dataclass(frozen=True)
class MetricsConfig:
    """`metrics`: where SLI metrics are pushed."""

    pushgateway_url: str | None = None
    job: str = DEFAULT_NAME
    runner_slot: str | None = None  # None: the runner slot's own, else DEFAULT_RUNNER_SLOT
    timeout: float = DEFAULT_METRICS_TIMEOUT  # seconds one push may take, retries included

    def slot(self, runner_slot: str) -> str:
        """The metrics group: this setting, else the runner slot's (`runner_slot`, may be
        empty), else the default."""
        return self.runner_slot or runner_slot or DEFAULT_RUNNER_SLOT


@dataclass(frozen=True)
class UpgradeConfig:
    """`upgrade`: the dependency-upgrade check (`repro-gate upgrade`): baseline lock against a
    candidate lock, in environments built from the locks alone."""

    lock: str | None = None  # the baseline lockfile; None: uv.lock, else requirements.txt
    inherit_site_packages: bool = False  # layer the pins over the running interpreter's packages
    tolerance: ToleranceConfig | None = None  # None: the gate's `tolerance`
    max_bisect_runs: int = 32  # probe runs the culprit search may take at most
    cache_dir: str = DEFAULT_ENV_CACHE  # `~` is the user's home

    @property
    def cache_path(self) -> Path:
        """`cache_dir` with `~` expanded."""
        return Path(self.cache_dir).expanduser()

    @classmethod
    def from_document(cls, value: dict[str, Any] | None) -> UpgradeConfig:
        """From the config value `{lock, inherit_site_packages, tolerance, ...}`."""
        document = dict(value or {})
        if "tolerance" in document:
            document["tolerance"] = ToleranceConfig.from_document(document["tolerance"])
        return cls(**document)

    def as_document(self) -> dict[str, Any]:
        """The config value this section was read from (defaults filled in)."""
        document = _present(self)
        if self.tolerance is not None:
            document["tolerance"] = self.tolerance.as_document()
        return document


@dataclass(frozen=True)
class GoldenConfig:
    """`golden`: the golden trajectory a gate compares run A with (docs/golden.md).

    `tolerance` is None for a bitwise comparison, else `{loss: {rtol, atol, steps_outside},
    tensors: {rtol, atol}}` as written.
    """

    path: str = DEFAULT_GOLDEN_PATH  # a file, or a folder of files named by machine class
    tolerance: dict[str, Any] | None = None
    on_change: OnChange = "fail"

    @classmethod
    def from_document(cls, value: str | dict[str, Any] | None) -> GoldenConfig:
        """From the config value: a path, or `{path, tolerance, on_change}`."""
        if isinstance(value, str):
            return cls(path=value)
        return cls(**(value or {}))


@dataclass(frozen=True)
class Config:
    """The effective configuration of one gate run; paths are absolute."""

    workdir: Path
    output_dir: Path
    name: str = DEFAULT_NAME
    command: Command | None = None  # None: the embedded reference training
    artifacts: tuple[str, ...] = ()  # empty: DEFAULT_RUN_DIR_GLOBS and DEFAULT_WORKDIR_GLOBS
    seed: int | None = None  # None: the gate seeds nothing (seeding is the training's job)
    runs: int = 2
    timeout: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    determinism: Determinism = "warn"
    fail_fast: bool = True
    data: tuple[Path, ...] = ()
    baseline: Path | None = None
    config_file: Path | None = None
    # Run a fork's pull request on a self-hosted runner of a public repository, or a fork's head
    # checked out by pull_request_target (github/fork_safety.py): refused unless this is set.
    allow_fork_pull_requests: bool = False
    tolerance: ToleranceConfig = ToleranceConfig()
    compare: CompareConfig = CompareConfig()
    cost: CostConfig = CostConfig()
    resume: ResumeConfig | None = None  # None: no resume check
    reference: ReferenceConfig = ReferenceConfig()
    container: ContainerConfig = ContainerConfig()
    report: ReportConfig = ReportConfig()
    metrics: MetricsConfig = MetricsConfig()
    upgrade: UpgradeConfig = UpgradeConfig()
    golden: GoldenConfig = GoldenConfig()
    vary: VaryConfig = field(default_factory=VaryConfig)

    def in_action(self) -> Config:
        """This configuration under the action's profile: a container run without `gpus`
        takes ACTION_GPUS."""
        if not self.container.image or self.container.gpus is not None:
            return self
        return replace(self, container=replace(self.container, gpus=ACTION_GPUS))

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Config:
        """From a schema-valid document whose paths are already absolute."""
        doc = dict(document)
        container = dict(doc.get("container") or {})
        for key in ("image", "gpus", "network"):
            if key in doc:
                container[key] = doc[key]
        if isinstance(container.get("gpus"), list):
            container["gpus"] = tuple(container["gpus"])
        if "env_allow" in container:
            container["env_allow"] = tuple(container["env_allow"])
        reference = dict(doc.get("reference") or {})
        if "device" in doc:
            reference["device"] = doc["device"]
        optional_path: dict[str, Any] = {
            key: Path(doc[key]) for key in ("baseline", "config_file") if doc.get(key)}
        return cls(
            **{key: doc[key] for key in ("name", "seed", "runs", "timeout", "determinism",
                                         "fail_fast", "allow_fork_pull_requests")
               if doc.get(key) is not None},
            workdir=Path(doc["workdir"]),
            output_dir=Path(doc["output_dir"]),
            command=_command(doc.get("command")),
            artifacts=tuple(doc.get("artifacts") or ()),
            env=dict(doc.get("env") or {}),
            data=tuple(Path(p) for p in doc.get("data") or ()),
            **optional_path,
            tolerance=ToleranceConfig.from_document(doc.get("tolerance")),
            compare=CompareConfig.from_document(doc.get("compare")),
            cost=CostConfig(**(doc.get("cost") or {})),
            resume=ResumeConfig.from_document(doc.get("resume")),
            reference=ReferenceConfig(**reference),
            container=ContainerConfig(**container),
            report=ReportConfig(**(doc.get("report") or {})),
            metrics=MetricsConfig(**(doc.get("metrics") or {})),
            upgrade=UpgradeConfig.from_document(doc.get("upgrade")),
            golden=GoldenConfig.from_document(doc.get("golden")),
            vary=VaryConfig.from_document(doc.get("vary")),
        )

    def as_document(self) -> dict[str, Any]:
        """The effective configuration as the manifest records it (keys of config.schema.json,
        plus `config_file`); unset optional values are left out."""
        container = _present(self.container)
        reference = _present(self.reference)
        document: dict[str, Any] = {
            "name": self.name,
            "command": list(self.command) if isinstance(self.command, tuple) else self.command,
            "workdir": str(self.workdir),
            "artifacts": list(self.artifacts) or None,
            "seed": self.seed,
            "runs": self.runs,
            "tolerance": self.tolerance.as_document(),
            "compare": self.compare.as_document(),
            "timeout": self.timeout,
            "env": dict(self.env),
            "determinism": self.determinism,
            "cost": _present(self.cost),
            "resume": self.resume.as_document() if self.resume else None,
            "fail_fast": self.fail_fast,
            "allow_fork_pull_requests": self.allow_fork_pull_requests,
            "device": reference.pop("device"),
            "reference": reference,
            "output_dir": str(self.output_dir),
            "data": [str(path) for path in self.data],
            "baseline": str(self.baseline) if self.baseline else None,
            "image": container.pop("image", None),
            "gpus": container.pop("gpus", None),
            "network": container.pop("network"),
            "container": container,
            "report": _present(self.report),
            "metrics": _present(self.metrics),
            "upgrade": self.upgrade.as_document(),
            "golden": _present(self.golden),
            "vary": self.vary.as_document(),
        }
        present = {key: value for key, value in document.items() if value is not None}
        return {**present, "config_file": str(self.config_file) if self.config_file else None}


@cache
def default_document() -> dict[str, Any]:
    """Every key's default as a config document; keys without a default are left out."""
    defaults = Config(workdir=Path(DEFAULT_WORKDIR), output_dir=Path(DEFAULT_OUTPUT_DIR))
    document = defaults.as_document()
    return {key: value for key, value in document.items() if value is not None}


def _command(value: str | list[str] | None) -> Command | None:
    """The config value of `command`: a string stays one, a list becomes an argv tuple."""
    if not value:
        return None
    return value if isinstance(value, str) else tuple(value)


def _present(section: Any) -> dict[str, Any]:
    """A section's fields as plain JSON values, leaving out those that are None."""
    values: dict[str, Any] = {}
    for item in fields(section):
        value = getattr(section, item.name)
        if value is not None:
            values[item.name] = list(value) if isinstance(value, tuple) else value
    return values
