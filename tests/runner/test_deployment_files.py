"""The one-host deployment files agree with each other and with runner.yml's schema.

`runner/systemd/repro-gate-runner.service` (parsed, `systemd-analyze verify` where systemd's
tools are installed, and its capability bounding set tried on a real rootless slot engine),
`runner/compose.yaml` (validated against the Compose Specification's own
JSON Schema, a copy in tests/fixtures/compose/), `runner/runner.example.yml` (loaded by the
service's own `load_runner_config`), the runner image pinned in it and in the ARC values, and
docs/runner.md, which the alert rules link to.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jsonschema
import pytest
import yaml
from helpers.paths import ROOT
from helpers.rootless_slots import RootlessHost

from repro_gate.runner.runner_config import (
    DEFAULT_DRAIN_TIMEOUT,
    AppAuth,
    EngineKind,
    load_runner_config,
)

UNIT = ROOT / "runner" / "systemd" / "repro-gate-runner.service"
COMPOSE = ROOT / "runner" / "compose.yaml"
EXAMPLE = ROOT / "runner" / "runner.example.yml"
ARC_VALUES = ROOT / "runner" / "arc" / "values.yaml"
COMPOSE_SCHEMA = ROOT / "tests" / "fixtures" / "compose" / "compose-spec.json"
RUNNER_SCHEMA = ROOT / "schemas" / "runner.schema.json"
DOC = ROOT / "docs" / "runner.md"
SERVICE = "runner-service"
CONFIG_PATH = "/etc/repro-gate/runner.yml"  # where both ways read runner.yml
DIGEST = re.compile(r"@sha256:([0-9a-f]{64})$")
PLACEHOLDER = "0" * 64
# systemd < 254 does not know these two (the unit says so); anything else it reports is a fault.
NEWER_SYSTEMD_KEYS = ("RestartSteps", "RestartMaxDelaySec")
INSTALLED = "/opt/repro-gate/bin/repro-gate"
# What wiping other uids' files takes: all the compose (shared engine) service holds.
WIPE_CAPABILITIES = {"CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER"}
# What starting and stopping the slots' rootless engines takes on top (the unit says why).
ENGINE_CAPABILITIES = {"CAP_CHOWN", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SYS_ADMIN"}
# Each would bind the engines and their containers too, and breaks them (the unit says how).
ENGINE_BREAKING = ("RestrictNamespaces", "PrivateUsers", "SystemCallFilter",
                   "RestrictAddressFamilies", "RestrictSUIDSGID", "ProtectKernelTunables",
                   "ProtectKernelLogs", "ProtectProc", "ProtectHostname", "ProtectClock",
                   "LockPersonality", "RestrictRealtime", "MemoryDenyWriteExecute")
# systemd-analyze security's rating of the unit (systemd 252): the engines need SYS_ADMIN in the
# bounding set and no seccomp filter. A looser unit scores higher and fails this.
EXPOSURE_AT_MOST = 7.3
DURATION_UNITS = {"h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0, "ms": 0.001, "": 1.0}


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool


def seconds(span: str) -> float:
    """A systemd time span ("3720", "62min", "1h 2min") or a Go duration ("62m", "1h2m")."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|ms|m|s|)", span.strip())
    assert parts and "".join(n + u for n, u in parts) == re.sub(r"\s", "", span), span
    return sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(UNIT, encoding="utf-8")
    return parser


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def service() -> dict:
    return compose()["services"][SERVICE]


def mounts() -> list[Mount]:
    return [Mount(v["source"], v["target"], bool(v.get("read_only"))) for v in service()["volumes"]]


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


def load_example(folder: Path, **auth: object) -> Path:
    """The example as the service reads it, its key (or `auth`) pointed at a file in `folder`."""
    document = example()
    key = folder / "app.private-key.pem"
    key.write_text("not read by load_runner_config\n", encoding="utf-8")
    document["github"]["auth"]["app"]["private_key_file"] = str(key)
    if auth:
        document["github"]["auth"] = auth
    path = folder / "runner.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_unit_sets_up_the_host_then_serves_without_the_system_daemon_and_restarts() -> None:
    parsed = unit()
    command = shlex.split(parsed["Service"]["ExecStart"])
    assert command == [INSTALLED, "runner", "serve", "--config", CONFIG_PATH]
    # Setup before every start, outside the sandbox ("+"): it writes /etc/passwd and /etc/subuid.
    setup = shlex.split(parsed["Service"]["ExecStartPre"])
    assert setup == [f"+{INSTALLED}", "runner", "setup", "--config", CONFIG_PATH]
    # The rootless engines are the service's own: no system daemon is required.
    assert "docker.service" not in parsed["Unit"].get("After", "").split()
    assert "Requires" not in parsed["Unit"]
    assert parsed["Service"]["Restart"] == "on-failure"
    assert seconds(parsed["Service"]["RestartSec"]) >= 1
    assert seconds(parsed["Service"]["RestartMaxDelaySec"]) > seconds(
        parsed["Service"]["RestartSec"])
    assert parsed["Unit"]["StartLimitIntervalSec"] == "0"  # never gives up
    assert parsed["Install"]["WantedBy"] == "multi-user.target"


def test_unit_stops_by_draining_longer_than_the_drain_timeout(tmp_path: Path) -> None:
    parsed = unit()["Service"]
    drain = load_runner_config(load_example(tmp_path)).drain_timeout
    assert parsed["KillSignal"] == "SIGTERM"
    assert parsed["KillMode"] == "mixed"  # SIGTERM to the service only, not its children
    assert seconds(parsed["TimeoutStopSec"]) > max(drain, DEFAULT_DRAIN_TIMEOUT)


def test_unit_is_hardened_but_lets_the_slot_engines_run(tmp_path: Path) -> None:
    parsed = unit()["Service"]
    config = load_runner_config(load_example(tmp_path))
    assert config.isolation.engine is EngineKind.ROOTLESS  # what the unit is for
    assert parsed["User"] == "root"  # starts each engine as its slot's user
    assert parsed["ProtectSystem"] == "strict"
    writable = [PurePosixPath(p.lstrip("-")) for p in parsed["ReadWritePaths"].split()]
    assert any(PurePosixPath(config.work_root).is_relative_to(p) for p in writable)
    assert not any(PurePosixPath("/etc").is_relative_to(p) for p in writable)  # setup's only
    # The slot users pass through work_root's parent to their own folders.
    assert int(parsed["StateDirectoryMode"], 8) & 0o001
    for key in ("PrivateTmp", "ProtectHome", "ProtectKernelModules"):
        assert parsed[key] == "yes", key
    # newuidmap and newgidmap are setuid root: under no_new_privs no engine starts.
    assert parsed.get("NoNewPrivileges", "no") == "no"
    assert not set(ENGINE_BREAKING) & set(parsed)
    # The runner's uid (1001) reads the hooks folder the service creates: no umask hides it.
    assert int(parsed["UMask"], 8) & 0o055 == 0
    capabilities = set(parsed["CapabilityBoundingSet"].split())
    assert capabilities == WIPE_CAPABILITIES | ENGINE_CAPABILITIES
    # NVML opens /dev/nvidia*, the engines /dev/net/tun and the slot's GPU node: file
    # permissions decide (setup sets them), neither a private /dev nor a device allow-list.
    assert parsed.get("PrivateDevices", "no") == "no"
    assert not {"DevicePolicy", "DeviceAllow"} & set(parsed)


# A slot's work folder as jobs leave it: a private folder of the runner's uid, and a sticky
# one (like /tmp) holding another uid's file. Wiped as the service wipes: links unfollowed.
WIPE = """
import json, pathlib, shutil, sys
root = pathlib.Path(sys.argv[1])
for entry in root.iterdir():
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink()
print(json.dumps(sorted(str(p.relative_to(root)) for p in root.rglob("*"))))
"""


def jobs_leftovers(work: Path) -> None:
    (work / "private" / "deep").mkdir(parents=True)
    (work / "private" / "deep" / "model.pt").write_bytes(b"x")
    (work / "sticky").mkdir()
    (work / "sticky" / "lock").write_bytes(b"x")
    for path, uid, mode in (("private/deep/model.pt", 1001, 0o600), ("private/deep", 1001, 0o700),
                            ("private", 1001, 0o700), ("sticky/lock", 1002, 0o600),
                            ("sticky", 1001, 0o1777)):
        os.chown(work / path, uid, uid)
        (work / path).chmod(mode)


def wipe_with(capabilities: list[str], work: Path) -> list[str]:
    """What is left after a root process holding only `capabilities` wiped `work`."""
    bounding = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in capabilities)])
    result = subprocess.run(["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all",
                             "--no-new-privs", sys.executable, "-c", WIPE, str(work)],
                            capture_output=True, text=True, timeout=60, check=True)
    return json.loads(result.stdout)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv (util-linux)")
def test_unit_capabilities_suffice_to_wipe_what_jobs_leave(tmp_path: Path) -> None:
    capabilities = sorted(WIPE_CAPABILITIES)  # also all the compose service holds
    assert set(capabilities) <= set(unit()["Service"]["CapabilityBoundingSet"].split())
    for name, granted in (("with", capabilities), ("without", [])):
        work = tmp_path / name
        work.mkdir()
        jobs_leftovers(work)
        left = wipe_with(granted, work)
        assert (left == []) is (name == "with"), (name, left)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """`verify` checks every key and that ExecStart is executable: point it at this venv's."""
    executable = Path(sys.executable).parent / "repro-gate"
    text = UNIT.read_text(encoding="utf-8").replace(f"{INSTALLED} ", f"{executable} ")
    copy = tmp_path / UNIT.name
    copy.write_text(text, encoding="utf-8")

    verify = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                            text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    faults = [line for line in verify.stderr.splitlines()
              if not any(f"Unknown key '{key}'" in line for key in NEWER_SYSTEMD_KEYS)]
    assert faults == []

    security = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(copy)],
                              capture_output=True, text=True, timeout=60)
    if "--offline" in security.stderr:  # systemd < 250 rates loaded units only
        pytest.skip("systemd-analyze security has no --offline")
    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", security.stdout)
    assert exposure, security.stdout + security.stderr
    assert float(exposure.group(1)) <= EXPOSURE_AT_MOST
    assert f"{EXPOSURE_AT_MOST}" in DOC.read_text(encoding="utf-8")  # the guide says so


def slot_endpoint_under(host: RootlessHost, *setpriv: str) -> tuple[str, int, str]:
    """`runner slot-endpoint --slot 0` run under `setpriv` with these options: its first line,
    then (SIGTERM once up) its exit code and stderr."""
    process = subprocess.Popen(
        ["setpriv", *setpriv, sys.executable, "-m", "repro_gate", "runner", "slot-endpoint",
         "--config", str(host.config), "--slot", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if first.startswith("DOCKER_HOST="):
        process.send_signal(signal.SIGTERM)
    try:
        _, errors = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _, errors = process.communicate(timeout=30)
    return first, process.returncode, errors


@pytest.mark.docker
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_unit_capabilities_start_and_stop_a_slot_engine_and_fewer_do_not(
        rootless_host: RootlessHost) -> None:
    """The unit's bounding set and no no_new_privs: what a real rootless engine needs."""
    capabilities = unit()["Service"]["CapabilityBoundingSet"].split()
    bounding = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in capabilities)])
    first, code, errors = slot_endpoint_under(rootless_host, f"--bounding-set={bounding}")
    assert first.startswith("DOCKER_HOST=unix://") and code == 0, errors

    # Without SYS_ADMIN the filter cannot pin bind sources (mounts), nor newuidmap map IDs.
    without_admin = bounding.replace(",+sys_admin", "")
    first, code, errors = slot_endpoint_under(rootless_host, f"--bounding-set={without_admin}")
    assert (first, code) == ("", 2) and "Operation not permitted" in errors, errors
    assert "pinned bind sources" in errors and errors.count("\n") == 1, errors

    first, code, errors = slot_endpoint_under(rootless_host, "--no-new-privs")
    assert (first, code) == ("", 2) and "newuidmap" in errors, errors


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    assert [error.message for error in validator.iter_errors(compose())] == []

    misspelt = compose()
    misspelt["services"][SERVICE]["stop_grace_priod"] = "1m"
    assert not validator.is_valid(misspelt)


def test_compose_service_paths_agree_with_the_example(tmp_path: Path) -> None:
    config = load_runner_config(load_example(tmp_path))
    by_target = {m.target: m for m in mounts()}
    assert service()["entrypoint"] == ["repro-gate", "runner", "serve", "--config", CONFIG_PATH]
    assert by_target[CONFIG_PATH].read_only
    # work_root is a bind source for sibling containers: the same path on both sides.
    work_root = str(config.work_root)
    assert by_target[work_root].source == work_root
    # The filter-only design: the host's daemon, whose socket the slots' filters forward to.
    socket = config.docker_url.removeprefix("unix://")
    assert by_target[socket].source == socket
    assert "isolation:\n#     engine: shared" in COMPOSE.read_text(encoding="utf-8")
    # The example names the key relatively: it resolves next to runner.yml, where the secret is.
    key = PurePosixPath(CONFIG_PATH).parent / example()["github"]["auth"]["app"][
        "private_key_file"]
    (secret,) = service()["secrets"]
    assert secret["target"] == str(key)
    assert compose()["secrets"][secret["source"]]["file"] == str(key)
    # systemd and compose read the same runner.yml.
    assert shlex.split(unit()["Service"]["ExecStart"])[-1] == CONFIG_PATH


def test_compose_stops_by_draining_and_publishes_the_metrics_port(tmp_path: Path) -> None:
    config = load_runner_config(load_example(tmp_path))
    assert service()["stop_signal"] == "SIGTERM"
    assert seconds(service()["stop_grace_period"]) > max(config.drain_timeout,
                                                         DEFAULT_DRAIN_TIMEOUT)
    assert config.metrics_listen is not None
    port = config.metrics_listen.rpartition(":")[2]
    assert [p.rpartition(":")[2] for p in service()["ports"]] == [port]
    assert f"127.0.0.1:{port}/metrics" in " ".join(service()["healthcheck"]["test"])
    assert service()["gpus"] == "all"  # NVML reads every GPU; each runner gets one
    assert service()["user"] == "0:0" and service()["read_only"] is True
    # What wiping other uids' files takes, none of what the rootless engines would need.
    assert service()["cap_drop"] == ["ALL"]
    assert {f"CAP_{c}" for c in service()["cap_add"]} == WIPE_CAPABILITIES
    assert service()["security_opt"] == ["no-new-privileges:true"]


def test_compose_builds_the_action_image_with_nvml() -> None:
    """The published action image has no nvidia-ml-py: the service's is built with `runner`."""
    build = service()["build"]
    assert (COMPOSE.parent / build["context"]).resolve() == ROOT
    assert build["args"]["EXTRAS"] == "runner"
    assert service()["pull_policy"] == "build"  # the local name is never pulled from a registry
    assert 'ARG EXTRAS=""' in (ROOT / "Dockerfile").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^runner = \["nvidia-ml-py[^"]*", "cryptography', pyproject, re.MULTILINE)


def test_example_loads_with_an_app_or_a_token_file(tmp_path: Path) -> None:
    config = load_runner_config(load_example(tmp_path))
    assert isinstance(config.github.auth, AppAuth)
    assert config.github.auth.private_key_file == tmp_path / "app.private-key.pem"

    token = tmp_path / "github-token"
    token.write_text("ghs_example\n", encoding="utf-8")
    with_token = load_runner_config(load_example(tmp_path, token_file=str(token)))
    assert with_token.github.auth.token_file == token  # type: ignore[union-attr]


def test_example_shows_every_key_of_the_schema() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    missing = [key for key in schema_keys(json.loads(RUNNER_SCHEMA.read_text(encoding="utf-8")))
               if not re.search(rf"^\s*#?\s*{re.escape(key)}:", text, re.MULTILINE)]
    assert missing == []


def test_guide_lists_every_key_of_the_schema() -> None:
    text = DOC.read_text(encoding="utf-8")
    schema = json.loads(RUNNER_SCHEMA.read_text(encoding="utf-8"))
    # Each setting in code, alone or ending a dotted path (`slots.source`, `app_id`).
    assert [key for key in schema_keys(schema, leaves_only=True)
            if not re.search(rf"`(?:[\w.]+\.)?{re.escape(key)}`", text)] == []


def schema_keys(schema: dict, *, leaves_only: bool = False) -> list[str]:
    """Every property name in the schema, nested ones included (or only the settings)."""
    keys = []
    for name, sub in schema.get("properties", {}).items():
        if not (leaves_only and "properties" in sub):
            keys.append(name)
        keys.extend(schema_keys(sub, leaves_only=leaves_only))
    return keys


def test_runner_image_is_pinned_to_the_same_real_digest_here_and_on_kubernetes() -> None:
    image = example()["runner"]["image"]
    arc_image = yaml.safe_load(ARC_VALUES.read_text(encoding="utf-8"))["template"]["spec"][
        "containers"][0]["image"]
    digests = {DIGEST.search(image).group(1), DIGEST.search(arc_image).group(1)}  # type: ignore[union-attr]
    assert len(digests) == 1 and PLACEHOLDER not in digests
    assert image.startswith("ghcr.io/actions/actions-runner@sha256:")
    version = arc_image.split("@")[0].rpartition(":")[2]
    doc = DOC.read_text(encoding="utf-8")
    assert f"imagetools inspect ghcr.io/actions/actions-runner:{version}" in doc
    assert digests.pop() in doc  # the guide names the digest it ships, and how it was found


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_guide_has_the_sections_the_alerts_and_other_docs_link_to() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert {"unhealthy-slots", "registration-failures", "the-runner-image", "the-github-app",
            "upgrade-and-drain"} <= anchors(doc)
    assert set(re.findall(r"\]\(#([\w-]+)\)", doc)) <= anchors(doc)  # its own links resolve
    alerts = (ROOT / "runner" / "prometheus" / "alert-rules.yml").read_text(encoding="utf-8")
    runbooks = set(re.findall(r"docs/runner\.md#([\w-]+)", alerts))
    assert {"unhealthy-slots", "registration-failures"} <= runbooks <= anchors(doc)
    assert "docs/runner.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(runner.md)" in (ROOT / "docs" / "runner-kubernetes.md").read_text(encoding="utf-8")
    for permission in ("Administration: read and write", "Self-hosted runners: read and write"):
        assert permission in doc
