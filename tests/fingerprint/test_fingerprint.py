"""Fingerprint collection, config_hash identity, and the manifest sections."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import CLI
from helpers.git_repo import GIT
from helpers.paths import FIXTURES, MANIFEST_FAIL, ROOT

from repro_gate import validation
from repro_gate.config import Config
from repro_gate.errors import GateError
from repro_gate.fingerprint import (
    collect_host,
    config_hash,
    diff_lines,
    environment_diff,
    manifest_sections,
)
from repro_gate.fingerprint.code import collect_code, strip_credentials
from repro_gate.fingerprint.data import hash_data
from repro_gate.fingerprint.nvml import parse_nvml
from repro_gate.probe import INJECT_DIR

PROJECTS = FIXTURES / "projects"

RAW_NVML = {
    "driver_version": "550.54.15",
    "cuda_driver_version": 12040,
    "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3",
                 "uuid": "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b",
                 "pci_bus_id": "00000000:19:00.0", "memory_total": 85520809984,
                 "compute_capability": (9, 0), "mig_mode": [0, 0], "ecc_mode": [1, 1]}],
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def project_repo(tmp_path: Path, name: str = "clean") -> Path:
    """A copy of a sample project as a fresh git repository with one commit."""
    repo = tmp_path / name
    shutil.copytree(PROJECTS / name, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sample")
    return repo


def in_process_module():
    if str(INJECT_DIR) not in sys.path:
        sys.path.append(str(INJECT_DIR))
    import _repro_gate_fingerprint

    return _repro_gate_fingerprint


def config_for(repo: Path, **extra: object) -> Config:
    return Config.from_document({
        "seed": 1234, "data": [str(repo / "data/train"), str(repo / "data/labels.csv")],
        "workdir": str(repo), "output_dir": str(repo / "repro-gate-out"), **extra,
    })


@pytest.fixture(scope="module")
def runtime() -> dict:
    """This interpreter's in-process fingerprint (torch imported)."""
    return in_process_module().collect(import_torch=True)


def sections(repo: Path, runtime: dict, *, host: dict | None = None, config: Config | None = None,
             baseline: Path | None = None, image: dict | None = None) -> dict:
    config = config or config_for(repo)
    host = host or collect_host(config.data, repo)
    return manifest_sections(config, host, {"A": runtime, "B": copy.deepcopy(runtime)}, image,
                             baseline)


# In-process module -----------------------------------------------------------------------------

def test_in_process_collect_describes_this_interpreter(runtime: dict) -> None:
    import platform

    import torch

    assert runtime["python"]["version"] == platform.python_version()
    assert runtime["torch"]["version"] == str(torch.__version__)
    assert runtime["torch"]["cudnn"] == (
        None if torch.backends.cudnn.version() is None else str(torch.backends.cudnn.version()))
    assert runtime["flags"]["deterministic_algorithms"] == (
        torch.are_deterministic_algorithms_enabled())
    assert runtime["flags"]["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert runtime["threads"]["torch_num_threads"] == torch.get_num_threads()
    assert runtime["packages"]["versions"]["torch"] == runtime["torch"]["version"]
    listing = "".join(f"{n}=={v}\n" for n, v in sorted(runtime["packages"]["versions"].items()))
    assert runtime["packages"]["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    assert runtime["errors"] == []


def test_in_process_gpu_fields_say_why_absent(runtime: dict) -> None:
    import torch

    gpus = runtime["gpus"]
    if not torch.cuda.is_initialized():
        assert gpus["devices"] == []
        assert gpus["reason"] in ("torch is built without CUDA",
                                  "CUDA was not initialized in this process")


def test_dataloader_without_seeding_is_recorded_with_its_line(tmp_path: Path) -> None:
    repo = project_repo(tmp_path, "sloppy")
    script = (
        "import json, runpy, sys\n"
        f"sys.path.insert(0, {str(INJECT_DIR)!r})\n"
        "import torch, _repro_gate_fingerprint as fp\n"
        "fp.install_torch_observers()\n"
        "runpy.run_path('train.py', run_name='__main__')\n"
        "print(json.dumps(fp.collect()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True,
                          text=True, timeout=300, env={"REPRO_GATE_SEED": "7", "PATH": ""})
    assert done.returncode == 0, done.stderr
    collected = json.loads(done.stdout.splitlines()[-1])
    line = next(n for n, text in enumerate((repo / "train.py").read_text().splitlines(), 1)
                if "DataLoader(data" in text)
    assert collected["dataloaders"] == [{"file": "train.py", "line": line, "num_workers": 2,
                                         "generator": False, "worker_init_fn": False,
                                         "count": 1}]
    assert collected["random"]["seed"] == 7
    assert collected["flags"]["cudnn_benchmark"] is True

    config = config_for(repo, data=[])
    result = manifest_sections(config, collect_host(config.data, repo),
                               {"A": collected, "B": collected, "default": None}, None, None)
    items = {item["id"]: item for item in result["checklist"]["items"]}
    assert items["dataloader_workers"]["status"] == "fail"
    assert f"train.py:{line}" in items["dataloader_workers"]["detail"]
    assert items["cudnn_benchmark"]["status"] == "fail"
    assert items["seeds"]["status"] == "pass"
    assert result["fingerprint"]["in_process"]["runs"] == {
        "A": "recorded", "B": "recorded", "default": "missing"}


# Identity ----------------------------------------------------------------------------------------

def test_same_config_same_hash_in_two_processes(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    hashes = []
    for _ in range(2):
        done = subprocess.run([str(CLI), "fingerprint", "--json"], cwd=repo, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert validation.errors("fingerprint", document["fingerprint"]) == []
        assert document["config_hash"] == config_hash(document["fingerprint"])
        hashes.append(document["config_hash"])
    assert hashes[0] == hashes[1]
    paths = {e["path"]: e["files"] for e in document["fingerprint"]["data"]["paths"]}
    assert paths == {"data/train/": 2, "data/labels.csv": 1}
    assert [lf["path"] for lf in document["fingerprint"]["env"]["lockfiles"]] == ["uv.lock"]


def test_volatile_fields_stay_out_of_the_hash(tmp_path: Path, runtime: dict) -> None:
    repo = project_repo(tmp_path)
    config = config_for(repo)
    host = collect_host(config.data, repo)
    host["gpus"] = parse_nvml(RAW_NVML)
    base = sections(repo, runtime, host=host, config=config)
    moved = copy.deepcopy(host)
    moved.update(hostname="other-runner", collected_at="2030-01-01T00:00:00+00:00")
    moved["gpus"]["devices"][0].update(uuid="GPU-00000000-1111-2222-3333-444444444444",
                                       pci_bus_id="00000000:AA:00.0")
    moved["code"]["remote_url"] = "https://example.com/fork.git"
    other_runtime = copy.deepcopy(runtime)
    other_runtime["random"]["torch_initial_seed"] = 99
    other_runtime["platform"]["kernel"] = "0.0.0-other"
    again = manifest_sections(config, moved, {"A": other_runtime}, None, None)
    assert again["config_hash"] == base["config_hash"]


def perturbed(repo: Path, runtime: dict, category: str) -> tuple[dict, dict]:
    """Sections before and after a change in one category (real files, git and parsers)."""
    config = config_for(repo)
    host = collect_host(config.data, repo)
    host["gpus"] = parse_nvml(RAW_NVML)
    before = sections(repo, runtime, host=host, config=config)
    runtime_after = copy.deepcopy(runtime)
    if category == "code":
        (repo / "train.py").write_text("# changed\n", encoding="utf-8")
        git(repo, "commit", "-q", "-am", "change")
    elif category == "data":
        (repo / "data/train/shard-000.txt").write_text("shard 0: 9 9 9\n", encoding="utf-8")
    elif category == "env":
        runtime_after["torch"]["version"] = "2.4.0"
        lock = repo / "uv.lock"
        lock.write_text(lock.read_text().replace('version = "2.0.1"', 'version = "2.1.0"'))
    elif category == "random":
        runtime_after["flags"]["cudnn_benchmark"] = True
    elif category == "hardware":
        raw = copy.deepcopy(RAW_NVML)
        raw["driver_version"] = "560.28.03"
        host_after = copy.deepcopy(host)
        host_after["gpus"] = parse_nvml(raw)
        return before, sections(repo, runtime, host=host_after, config=config)
    host_after = collect_host(config.data, repo)
    host_after["gpus"] = host["gpus"]
    return before, sections(repo, runtime_after, host=host_after, config=config)


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        ("code", "code: commit "),
        ("data", "data: data/train/ 1 file changed (shard-000.txt)"),
        ("env", "env: torch "),
        ("random", "random: cuDNN benchmark off -> on"),
        ("hardware", "hardware: driver 550.54.15 -> 560.28.03"),
    ],
)
def test_each_category_changes_the_hash_and_the_diff_names_it(
        tmp_path: Path, runtime: dict, category: str, expected: str) -> None:
    repo = project_repo(tmp_path)
    before, after = perturbed(repo, runtime, category)
    assert before["config_hash"] != after["config_hash"]
    result = environment_diff(before, after)
    assert validation.errors("environment-diff", result) == []
    assert result["equal"] is False
    lines = diff_lines(result)
    assert any(line.startswith(expected) for line in lines), lines
    categories = {change["category"] for change in result["changes"]}
    # Data and lockfiles of the sample live in the repository: editing them dirties the tree.
    assert categories - {"code"} == {category} or categories == {category}
    if category == "env":
        assert "env: torch 2.4.0" not in lines  # old -> new order
        assert f"env: torch {runtime['torch']['version']} -> 2.4.0" in lines
        assert "env: lockfile uv.lock: 1 package changed (numpy 2.0.1 -> 2.1.0)" in lines


def test_unchanged_environment_diffs_equal(tmp_path: Path, runtime: dict) -> None:
    repo = project_repo(tmp_path)
    first, second = sections(repo, runtime), sections(repo, runtime)
    assert first["config_hash"] == second["config_hash"]
    result = environment_diff(first, second)
    assert result["equal"] is True
    assert diff_lines(result) == []


# Manifest sections -------------------------------------------------------------------------------

def test_sections_validate_and_carry_the_baseline_diff(tmp_path: Path, runtime: dict) -> None:
    repo = project_repo(tmp_path)
    image = {"reference": "ghcr.io/example/trainer:1.0",
             "id": "sha256:" + "a" * 64,
             "repo_digests": ["ghcr.io/example/trainer@sha256:" + "b" * 64]}
    baseline_sections = sections(repo, runtime, image=image)
    baseline = tmp_path / "baseline.json"
    # A complete manifest of a real shape carrying these sections, as an earlier gate wrote it.
    document = json.loads(MANIFEST_FAIL
                          .read_text(encoding="utf-8"))
    document.pop("environment_diff")
    baseline.write_text(json.dumps({**document, **baseline_sections}), encoding="utf-8")
    newer = dict(image, id="sha256:" + "c" * 64)
    result = sections(repo, runtime, image=newer, baseline=baseline)
    for name in ("fingerprint", "checklist"):
        assert validation.errors(name, result[name]) == []
    assert validation.errors("environment-diff", result["environment_diff"]) == []
    assert diff_lines(result["environment_diff"]) == [
        f"env: image ID sha256:{'a' * 64} -> sha256:{'c' * 64}"]
    items = {item["id"]: item for item in result["checklist"]["items"]}
    assert items["image_pinned"]["status"] == "fail"
    assert items["image_pinned"]["fix"] == (
        f"pin it by digest: `image: ghcr.io/example/trainer@sha256:{'b' * 64}`")
    assert result["fingerprint"]["env"]["image"]["status"] == "known"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("{not json", "not valid JSON"),
        ('{"schema_version": 1, "tool": {}}', "has no fingerprint"),
        ('["a", "list"]', "not a JSON object"),
    ],
)
def test_bad_baseline_raises_a_baseline_error(tmp_path: Path, runtime: dict,
                                              content: str | None, message: str) -> None:
    repo = project_repo(tmp_path)
    baseline = tmp_path / "baseline.json"
    if content is not None:
        baseline.write_text(content, encoding="utf-8")
    with pytest.raises(GateError) as raised:
        sections(repo, runtime, baseline=baseline)
    assert raised.value.kind == "baseline"
    assert message in raised.value.message


def test_differences_between_runs_are_surfaced(tmp_path: Path, runtime: dict) -> None:
    repo = project_repo(tmp_path)
    config = config_for(repo)
    run_b = copy.deepcopy(runtime)
    run_b["threads"]["torch_num_threads"] = runtime["threads"]["torch_num_threads"] + 3
    run_b["random"]["torch_initial_seed"] = 12345  # volatile: not reported
    result = manifest_sections(config, collect_host(config.data, repo),
                               {"A": runtime, "B": run_b, "default": runtime}, None, None)
    assert result["fingerprint"]["in_process"]["mismatches"] == [
        {"field": "threads.torch_num_threads",
         "values": {"A": runtime["threads"]["torch_num_threads"],
                    "B": runtime["threads"]["torch_num_threads"] + 3}}]
    assert result["fingerprint"]["in_process"]["source"] == "A"


def test_missing_in_process_fingerprint_says_why(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    config = config_for(repo)
    result = manifest_sections(config, collect_host(config.data, repo), {"A": None, "B": None},
                               None, None)
    env = result["fingerprint"]["env"]
    assert env["reason"] == "no in-process fingerprint: the probe wrote none"
    assert env["torch"] is None
    assert validation.errors("fingerprint", result["fingerprint"]) == []
    items = {item["id"]: item["status"] for item in result["checklist"]["items"]}
    assert items["deterministic_algorithms"] == "warn"


def test_gpu_less_machine_says_why_gpus_are_absent(tmp_path: Path, runtime: dict) -> None:
    repo = project_repo(tmp_path)
    host = collect_host(config_for(repo).data, repo)
    hardware = sections(repo, runtime, host=host)["fingerprint"]["hardware"]
    if host["gpus"]["devices"]:
        assert hardware["gpus"]
    else:
        assert hardware["gpus"] == []
        assert hardware["gpu_reason"].startswith("NVML: ")
        assert "; torch: " in hardware["gpu_reason"]
        assert hardware["driver_version"] is None


# Code and data -----------------------------------------------------------------------------------

def test_git_facts_dirty_diff_and_credentials(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    git(repo, "remote", "add", "origin", "https://ci-bot:ghp_secret@github.com/example/t.git")
    clean = collect_code(repo)
    assert clean["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert clean["ref"] == "refs/heads/main"
    assert clean["dirty"] is False and clean["diff_sha256"] is None
    assert clean["remote_url"] == "https://github.com/example/t.git"
    (repo / "train.py").write_text("print('edited')\n", encoding="utf-8")
    dirty = collect_code(repo)
    diff = subprocess.run([*GIT, "-C", str(repo), "diff", "HEAD", "--no-ext-diff", "--binary"],
                          capture_output=True, check=True).stdout
    assert dirty["dirty"] is True
    assert dirty["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    assert collect_code(tmp_path / "clean" / "data")["commit"] == clean["commit"]
    outside = tmp_path / "plain"
    outside.mkdir()
    assert collect_code(outside)["reason"] == "not a git repository"


def test_strip_credentials() -> None:
    assert strip_credentials("https://user:tok@host.example/r.git") == "https://host.example/r.git"
    assert strip_credentials("ssh://git@host.example/r.git") == "ssh://host.example/r.git"
    assert strip_credentials("git@github.com:o/r.git") == "git@github.com:o/r.git"


def test_data_digest_matches_sha256sum(tmp_path: Path) -> None:
    root = tmp_path / "set"
    (root / "b").mkdir(parents=True)
    (root / "a.bin").write_bytes(bytes(range(256)) * 5000)
    (root / "b" / "z.txt").write_text("zeta\n", encoding="utf-8")
    (root / "B.txt").write_text("upper\n", encoding="utf-8")
    result = hash_data(["set"], tmp_path, workers=2)
    entry = result["paths"][0]
    assert (entry["path"], entry["files"], entry["kind"]) == ("set/", 3, "directory")
    assert entry["bytes"] == 256 * 5000 + 5 + 6
    listing = subprocess.run(["sha256sum", "B.txt", "a.bin", "b/z.txt"], cwd=root, check=True,
                             capture_output=True).stdout
    assert entry["sha256"] == hashlib.sha256(listing).hexdigest()
    assert list(entry["file_sha256"]) == ["B.txt", "a.bin", "b/z.txt"]
    missing = hash_data(["nope"], tmp_path)["paths"][0]
    assert missing["error"] == "does not exist" and missing["sha256"] is None


def test_docs_list_exactly_the_fields_in_the_hash(tmp_path: Path, runtime: dict) -> None:
    import re

    from repro_gate.fingerprint import identity

    docs = ROOT / "docs" / "fingerprint.md"
    text = docs.read_text(encoding="utf-8")
    section = text.split("### In the hash", 1)[1].split("### Out of the hash", 1)[0]
    documented = set(re.findall(r"`((?:code|data|env|random|hardware)\.[a-z0-9_<>]+)`", section))
    repo = project_repo(tmp_path)
    fingerprint = sections(repo, runtime)["fingerprint"]
    # The distributed facts count only for a multi-process training: list them from one.
    fingerprint["random"]["distributed"] = {
        "world_size": 2, "backend": "gloo", "variables": {"NCCL_ALGO": "Ring"}}
    fields = identity(fingerprint)
    in_hash = {f"{category}.{key}" for category, values in fields.items() if category != "data"
               for key in values} | {"data.<path>"}
    assert documented == in_hash
