"""Real Pushgateway and Prometheus servers on free loopback ports, and schema-valid manifests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from helpers.paths import ROOT
from repro_gate import validation

PROMETHEUS_DIR = ROOT / "runner" / "prometheus"
GRAFANA_DIR = ROOT / "runner" / "grafana"
SCRAPE_SECONDS = 1
START_DEADLINE = 30.0


def need_binary(name: str) -> str:
    """Path of a server binary; in CI a missing one fails the test instead of skipping it."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found (apt-get install prometheus prometheus-pushgateway)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash for the gateway's basic-auth users (bcrypt package or the crypt module)."""
    try:
        import bcrypt

        return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    except ImportError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    except ImportError:
        message = "hashing a password needs the bcrypt package or the crypt module"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
        raise AssertionError("unreachable") from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], deadline_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; fail after `deadline_s` seconds."""
    end = time.monotonic() + deadline_s
    last_error: Exception | None = None
    while time.monotonic() < end:
        try:
            result = check()
        except (requests.RequestException, OSError) as error:
            last_error, result = error, None
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {deadline_s}s waiting for {what} ({last_error})")


def ready(url: str) -> bool:
    return requests.get(url, timeout=2).status_code == 200


@dataclass
class Server:
    """One server process we started, restartable on the same port."""

    argv: list[str]
    url: str
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: ready(self.url + "/-/ready"), START_DEADLINE, f"{self.argv[0]} ready")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None


@dataclass
class Pushgateway(Server):
    """A Pushgateway with its own group-state reader."""

    def groups(self) -> list[dict[str, Any]]:
        answer = requests.get(self.url + "/api/v1/metrics", timeout=5)
        answer.raise_for_status()
        return answer.json()["data"]

    def value(self, name: str, group: dict[str, str], **labels: str) -> float | None:
        """A series value in the group with exactly these grouping labels; None when absent."""
        for entry in self.groups():
            if entry["labels"] != group or name not in entry:
                continue
            for metric in entry[name]["metrics"]:
                own = {k: v for k, v in metric["labels"].items() if k not in group}
                own.pop("instance", None)
                if own == labels:
                    return float(metric["value"])
        return None


@dataclass
class Prometheus(Server):
    """A Prometheus that scrapes the Pushgateway every second, with the runner kit's rules."""

    rule_files: list[Path] = field(default_factory=list)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        answer = requests.get(self.url + "/api/v1/query", params=params, timeout=10)
        body = answer.json()
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {body.get('error')}")
        return body["data"]["result"]


def gateway_argv(port: int, storage: Path, web_config: Path | None = None) -> list[str]:
    argv = [
        need_binary("prometheus-pushgateway"),
        f"--web.listen-address=127.0.0.1:{port}",
        f"--persistence.file={storage / 'pushgateway.db'}",
        "--persistence.interval=1s",
    ]
    if web_config is not None:
        argv.append(f"--web.config.file={web_config}")
    return argv


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[Pushgateway]:
    port = free_port()
    (tmp_path / "pushgateway").mkdir()
    server = Pushgateway(
        argv=gateway_argv(port, tmp_path / "pushgateway"),
        url=f"http://127.0.0.1:{port}",
        log=tmp_path / "pushgateway.log",
    )
    server.start()
    yield server
    server.stop()


def fast_rule_copies(target: Path) -> list[Path]:
    """The runner kit's rule files with every group evaluated each second (same expressions)."""
    copies = []
    for name in ("recording-rules.yml", "alert-rules.yml"):
        document = yaml.safe_load((PROMETHEUS_DIR / name).read_text(encoding="utf-8"))
        for group in document["groups"]:
            group["interval"] = f"{SCRAPE_SECONDS}s"
        copy = target / name
        copy.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        copies.append(copy)
    return copies


@pytest.fixture
def prometheus(tmp_path: Path, pushgateway: Pushgateway) -> Iterator[Prometheus]:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text(encoding="utf-8"))
    config["global"]["scrape_interval"] = f"{SCRAPE_SECONDS}s"
    config["global"]["evaluation_interval"] = f"{SCRAPE_SECONDS}s"
    rules = fast_rule_copies(directory)
    config["rule_files"] = [str(path) for path in rules]
    scrape = config["scrape_configs"][0]
    scrape["scrape_interval"] = f"{SCRAPE_SECONDS}s"
    scrape["static_configs"] = [{"targets": [pushgateway.url.removeprefix("http://")]}]
    config_path = directory / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    port = free_port()
    server = Prometheus(
        argv=[
            need_binary("prometheus"),
            f"--config.file={config_path}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        url=f"http://127.0.0.1:{port}",
        log=tmp_path / "prometheus.log",
        rule_files=rules,
    )
    server.start()
    # Targets reach the scrape loop a few seconds after start: wait for the first scrape.
    wait_until(lambda: server.query("up == 1"), START_DEADLINE, "the first scrape of the gateway")
    yield server
    server.stop()


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def make_manifest(
    verdict: str,
    *,
    gate: str = "train",
    finished: datetime | None = None,
    checkpoints_equal: bool | None = None,
    max_abs_diff: float = 0.0,
    ops: int = 0,
    cost_pct: float | None = 12.5,
    fingerprint: dict[str, Any] | None = None,
    output_dir: Path | None = None,
) -> dict[str, Any]:
    """A manifest that validates against the schema, shaped like a gate run with `verdict`."""
    finished = finished or datetime.now(timezone.utc)
    started = finished - timedelta(seconds=30)
    equal = verdict == "pass" if checkpoints_equal is None else checkpoints_equal
    artifacts: list[dict[str, Any]] = []
    if verdict != "error":
        artifacts.append(
            {
                "path": "model.safetensors",
                "kind": "safetensors",
                "status": "equal" if equal else "different",
                "sha256_a": "a" * 64,
                "sha256_b": ("a" if equal else "b") * 64,
                "tensors": [
                    {
                        "name": "fc.weight",
                        "status": "equal" if equal else "different",
                        "max_abs_diff": 0.0 if equal else max_abs_diff,
                    },
                ],
            }
        )
    manifest: dict[str, Any] = {
        "schema_version": validation.load("manifest")["properties"]["schema_version"]["const"],
        "tool": {"name": "repro-gate", "version": "0.1.0"},
        "gate": gate,
        "verdict": verdict,
        # A code the gate writes: the manifest schema lists them all.
        "reasons": [] if verdict == "pass" else [{
            "code": "artifact_different" if verdict == "fail" else "run_failed",
            "message": f"run {verdict}",
        }],
        "started_at": iso(started),
        "finished_at": iso(finished),
        "wall_seconds": 30.0,
        "config": {"name": gate},
        "runs": [
            _run("det-1", "deterministic", 10.0),
            _run("det-2", "deterministic", 12.0),
            _run("default", "default", 8.0),
        ],
        "comparison": {
            "basis": "bitwise",
            "artifacts": artifacts,
            "trajectory": {"steps_compared": 5, "status": "equal" if equal else "different"},
            "first_divergence": {"step": 3, "parameters": ["fc.weight"], "runs": ["det-1", "det-2"]}
            if verdict == "fail"
            else None,
        },
        "nondeterministic_ops": [
            {"op": "aten::index_add_", "file": "model.py", "line": 88, "count": ops}
        ]
        if ops
        else [],
        # Measured with a figure; without one, inconclusive (too few block pairs).
        "cost": {
            "status": "measured" if cost_pct is not None else "inconclusive",
            **({} if cost_pct is not None else {"reason": "only 2 block pairs were timed"}),
            "pct": cost_pct,
            "ci95_pct": None if cost_pct is None else [cost_pct - 2.0, cost_pct + 2.0],
            "basis": "blocks",
            "det_step_seconds": 0.0225,
            "default_step_seconds": 0.02,
            "design": {"arms": ["deterministic", "default"], "block_steps": 4, "blocks": 6,
                       "pairs": 6 if cost_pct is not None else 2, "warmup_steps": 3},
            "max_width_pct": 20.0,
            "note": "both arms ran with CUBLAS_WORKSPACE_CONFIG and PYTHONHASHSEED set",
        },
    }
    if fingerprint is not None:
        manifest["fingerprint"] = fingerprint
    if output_dir is not None:
        manifest["output_dir"] = str(output_dir)
    problems = validation.errors("manifest", manifest)
    assert problems == [], problems
    return manifest


def make_fingerprint(
    *,
    torch: str | None = "2.4.1+cu124",
    cuda_build: str | None = "12.4",
    driver: str | None = "550.54.15",
    gpus: tuple[str | None, ...] = ("NVIDIA H100 80GB HBM3",),
) -> dict[str, Any]:
    """A fingerprint section that validates against the schema, on a host with `gpus`."""
    fingerprint = {
        "format": 1,
        "code": {
            "commit": "2f9c1e0b7a6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e",
            "ref": "refs/heads/main",
            "dirty": False,
            "diff_sha256": None,
            "remote_url": "https://github.com/octo/lm",
        },
        "data": {"paths": [], "bytes": 0, "files": 0},
        "env": {
            "image": {"status": "none", "reference": None, "id": None, "repo_digests": []},
            "python": "3.11.9",
            "os": "Linux",
            "libc": "glibc 2.35",
            "torch": torch,
            "cuda_build": cuda_build,
            "cudnn": "90100" if cuda_build else None,
            "nccl": None,
            "numpy": "1.26.4",
            "packages": None,
            "lockfiles": [],
            "lock_mismatches": [],
        },
        "random": {"seed": 0, "pythonhashseed": "0", "flags": {}, "threads": {}},
        "hardware": {
            "cpu": {"model": "AMD EPYC", "count": 8},
            "driver_version": driver,
            "cuda_driver_version": "12.4" if driver else None,
            "gpus": [
                {"index": i, "name": name, "uuid": None, "source": "nvml"}
                for i, name in enumerate(gpus)
            ],
        },
        "in_process": {
            "source": None,
            "runs": {},
            "mismatches": [],
            "dataloaders": [],
            "errors": [],
        },
    }
    problems = validation.errors("fingerprint", fingerprint)
    assert problems == [], problems
    return fingerprint


def _run(name: str, mode: str, seconds: float) -> dict[str, Any]:
    return {
        "name": name,
        "mode": mode,
        "exit_code": 0,
        "wall_seconds": seconds,
        "steps": 5,
        "log_path": f"runs/{name}/log.txt",
        "run_dir": f"runs/{name}",
        "artifacts": [],
        "timed_out": False,
        "stopped": None,
    }
