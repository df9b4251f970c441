"""Golden trajectories as a user works with them: a real git repository, real tiny trainings,
`repro-gate check` compares run A with the golden file, `repro-gate bless` writes it.

The first gate of the tiny training is blessed once for the module, and a pull request's branch
that reorders its sum is gated once; each test changes a copy of one of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.check_jsonschema import CHECK_JSONSCHEMA, OFFLINE
from helpers.git_repo import git
from helpers.golden_training import REORDERED_SUM, seeded_first, training
from helpers.paths import ROOT

GOLDEN_SCHEMA = ROOT / "src" / "repro_gate" / "schemas" / "golden.schema.json"
GOLDEN_DIR = Path(".repro-gate") / "golden"

# The same numbers, written another way: a helper function and other names (the layer's aside).
REFACTORED = """\
import torch


class LinearModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, features):
        return self.fc(features)


def mean_squared_error(prediction, target):
    errors = (prediction - target) ** 2
    return errors.sum() / errors.numel()


torch.manual_seed(0)
net = LinearModel()
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
features = torch.randn(64, 4)
labels = torch.randn(64, 1)
for _ in range(5):
    sgd.zero_grad()
    mean_squared_error(net(features), labels).backward()
    sgd.step()
torch.save(net.state_dict(), "model.pt")
"""


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def run(repo: Path, command: str, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    gate_args = ["--quiet", "--no-cost"] if command == "check" else []
    tail = ["--", sys.executable, "train.py"] if command == "check" else []
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", command, *gate_args, *args, *tail],
        cwd=repo, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=240,
        check=False)


def check(repo: Path, *args: str, env: dict[str, str] | None = None
          ) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = run(repo, "check", *args, env=env)
    manifest = json.loads((repo / "repro-gate-out" / "manifest.json").read_text())
    return done, manifest


def golden_of(manifest: dict) -> dict:
    return manifest["comparison"]["golden"]


def bless(repo: Path, env: dict[str, str] | None = None) -> Path:
    """`repro-gate bless` after a passing gate; the golden file it wrote, schema-checked."""
    done = run(repo, "bless", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted((repo / GOLDEN_DIR).glob("*.json"))
    assert len(written) == 1
    assert f"git add {written[0].relative_to(repo)}" in done.stdout
    assert_valid(written[0])
    return written[0]


def assert_valid(golden: Path) -> None:
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--schemafile", str(GOLDEN_SCHEMA), str(golden)],
        env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def blessed(repo: Path, env: dict[str, str] | None = None) -> Path:
    """The first gate of the repository (no golden file yet), blessed and committed."""
    done, manifest = check(repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert golden["status"] == "no_golden"
    assert golden["bless_command"].startswith("repro-gate bless")
    assert "no golden trajectory for machine class" in done.stdout
    # The run's own golden file waits in the output directory, for CI to upload.
    candidate = Path(golden["candidate"])
    assert f"this run's golden file: {candidate}" in done.stdout
    assert_valid(candidate)
    path = bless(repo, env=env)
    written = {key: json.loads(file.read_text()) for key, file in
               (("candidate", candidate), ("blessed", path))}
    assert written["candidate"]["steps"] == written["blessed"]["steps"]
    assert written["candidate"]["artifacts"] == written["blessed"]["artifacts"]
    commit(repo, "Bless the golden trajectory")
    return path


def new_project(folder: Path) -> Path:
    """A git repository in `folder` whose one commit holds the tiny training."""
    repo = folder / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("repro-gate-out/\n")
    (repo / "train.py").write_text(training())
    commit(repo, "Train")
    return repo


def copy_of(repo: Path, folder: Path) -> Path:
    """A copy of `repo` (its history and the last gate's output directory) in `folder`, for a
    test to change; the original stays as the module's fixture left it (the copied manifest
    still names the original's run directories, which `bless` reads)."""
    return Path(shutil.copytree(repo, folder / "project", symlinks=True))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return new_project(tmp_path)


@pytest.fixture(scope="module")
def blessed_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One repository's first gate, blessed and committed: the repository and its golden file.
    Tests copy it (`copy_of`) before they change anything."""
    repo = new_project(tmp_path_factory.mktemp("blessed"))
    return repo, blessed(repo).relative_to(repo)


@dataclass
class Gate:
    """A gate's repository, what the command returned and the manifest it wrote."""

    repo: Path
    done: subprocess.CompletedProcess[str]
    manifest: dict


@pytest.fixture(scope="module")
def reordered(blessed_repo: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> Gate:
    """A pull request's branch (`reorder`) of the blessed repository whose training seeds a
    few lines higher (a refactor) and sums the squared errors in reverse, and its gate against
    the golden file of `main`."""
    repo = copy_of(blessed_repo[0], tmp_path_factory.mktemp("reordered"))
    git(repo, "checkout", "-q", "-b", "reorder")
    (repo / "train.py").write_text(seeded_first(training(REORDERED_SUM)))
    commit(repo, "Seed first, and sum the squared errors in reverse")
    done, manifest = check(repo)
    return Gate(repo, done, manifest)


def test_a_refactor_keeps_the_numerics(blessed_repo: tuple[Path, Path], tmp_path: Path) -> None:
    project = copy_of(blessed_repo[0], tmp_path)
    golden_file = project / blessed_repo[1]

    (project / "train.py").write_text(REFACTORED)
    commit(project, "Refactor the training")
    done, manifest = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert golden["status"] == "same"
    assert golden.get("candidate") is None  # nothing new to bless: the earlier one is gone
    assert (project / "repro-gate-out" / "golden").is_dir()
    assert not list((project / "repro-gate-out" / "golden").glob("*.json"))
    assert golden["path"] == golden_file.relative_to(project).as_posix()
    assert (golden["steps_compared"], golden["artifacts_compared"]) == (5, 1)
    assert golden["renamed"] == []
    assert f"numerics unchanged against `{golden['path']}`" in done.stdout


def test_a_renamed_layer_keeps_the_numerics_and_is_listed(blessed_repo: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    project = copy_of(blessed_repo[0], tmp_path)
    (project / "train.py").write_text(training(layer="proj"))
    commit(project, "Rename the layer")
    done, manifest = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert (golden["status"], golden["first_divergence"]) == ("same", None)
    assert (golden["steps_compared"], golden["artifacts_compared"]) == (5, 1)
    assert golden["renamed"] == [{"golden": "fc.weight", "run": "proj.weight"},
                                 {"golden": "fc.bias", "run": "proj.bias"}]
    assert "tensors renamed (fc.weight -> proj.weight, fc.bias -> proj.bias)" in done.stdout
    assert "will not load with `load_state_dict(strict=True)`" in done.stdout


def test_a_moved_seeding_line_and_a_reordered_sum_change_the_numerics_by_the_code(
        blessed_repo: tuple[Path, Path], reordered: Gate) -> None:
    done, manifest = reordered.done, reordered.manifest
    # The refactor moved the seeding call the golden file records; the code's business.
    assert done.returncode == 1, done.stdout + done.stderr
    seedings = [json.loads(path.read_text())["software"]["seeding"] for path in (
        blessed_repo[0] / blessed_repo[1], reordered.repo / golden_of(manifest)["candidate"])]
    assert seedings[0] != seedings[1] and seedings[1].endswith("train.py:2")
    assert manifest["verdict"] == "fail"
    assert manifest["reasons"][0]["code"] == "numerics_changed"
    golden = golden_of(manifest)
    assert golden["status"] == "changed"
    assert golden["first_divergence"]["step"] == 3
    assert golden["first_divergence"]["cause"] == "forward"
    assert golden["attribution"]["kind"] == "code"
    assert golden["software_diff"] == []
    assert [point["delta"] for point in golden["loss_delta"][:2]] == [0.0, 0.0]
    assert golden["loss_delta"][2]["delta"] != 0.0
    assert "numerics changed against" in done.stdout and "at step 3 (forward)" in done.stdout


def test_a_tolerance_that_admits_the_reordering_reports_the_change_and_passes(
        reordered: Gate, tmp_path: Path) -> None:
    project = copy_of(reordered.repo, tmp_path)
    (project / ".repro-gate.yml").write_text(
        "golden:\n  tolerance:\n    loss: {rtol: 1.0e-4}\n"
        "    tensors: {rtol: 1.0e-4, atol: 1.0e-6}\n")
    done, manifest = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert golden_of(manifest)["status"] == "within_tolerance"
    assert "numerics within tolerance of" in done.stdout


def test_on_change_warn_reports_a_change_beyond_the_tolerance_and_passes(
        reordered: Gate, tmp_path: Path) -> None:
    project = copy_of(reordered.repo, tmp_path)
    (project / ".repro-gate.yml").write_text("golden:\n  on_change: warn\n")
    done, manifest = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert golden_of(manifest)["status"] == "changed"
    assert manifest["verdict"] == "pass"
    assert "numerics changed against" in done.stdout


def test_a_pull_request_that_carries_its_new_golden_file_passes_and_shows_the_change(
        blessed_repo: tuple[Path, Path], reordered: Gate, tmp_path: Path) -> None:
    # The branch's gate failed on the numerics alone: its runs are blessed, and reviewed with
    # the pull request.
    assert reordered.done.returncode == 1, reordered.done.stdout + reordered.done.stderr
    project = copy_of(reordered.repo, tmp_path)
    assert bless(project) == project / blessed_repo[1]
    commit(project, "Bless the new numerics")

    done, manifest = check(project, env={"GITHUB_BASE_REF": "main"})
    assert done.returncode == 0, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert golden["status"] == "same"
    base = golden["against_base"]
    assert base["path"] == f"main:{golden['path']}"
    assert base["status"] == "changed"
    assert base["first_divergence"]["step"] == 3
    report = run(project, "report", "--manifest", "repro-gate-out/manifest.json", "--markdown")
    assert f"against the base branch's `main:{golden['path']}`: changed at step 3" \
        in report.stdout, report.stdout + report.stderr


def test_a_lock_change_with_the_same_code_is_put_down_to_the_environment(
        project: Path, tmp_path: Path) -> None:
    # Its own gates: a training that imports numlib, blessed under numlib 1.0.
    sites = {}
    for version, scale in (("1.0", "1.0"), ("2.0", "1.5")):
        site = tmp_path / f"site-{version}"
        site.mkdir()
        (site / "numlib.py").write_text(f"SCALE = {scale}\n")
        sites[version] = {"PYTHONPATH": os.pathsep.join(
            [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    (project / "train.py").write_text(training(numlib=True))
    (project / "requirements.txt").write_text("numlib==1.0\n")
    commit(project, "Scale the inputs by numlib")
    blessed(project, env=sites["1.0"])

    (project / "requirements.txt").write_text("numlib==2.0\n")
    commit(project, "Upgrade numlib")
    (project / ".gitignore").unlink()  # the gate's own output, untracked, is not the training's
    done, manifest = check(project, env=sites["2.0"])
    assert done.returncode == 1, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert golden["status"] == "changed"
    assert golden["attribution"]["kind"] == "environment"
    assert [entry["field"] for entry in golden["software_diff"]] == ["lock"]
    assert "caused by the environment" in done.stdout


def test_another_machine_class_has_no_golden_file_unless_one_is_named(
        blessed_repo: tuple[Path, Path], tmp_path: Path) -> None:
    project = copy_of(blessed_repo[0], tmp_path)
    golden_file = project / blessed_repo[1]
    document = json.loads(golden_file.read_text())
    document["machine_class"] = "gpu-h100-x8"
    other = golden_file.with_name("gpu-h100-x8.json")
    other.write_text(json.dumps(document))
    golden_file.unlink()
    assert_valid(other)
    commit(project, "Only the H100 golden trajectory")

    done, manifest = check(project)
    assert done.returncode == 0, done.stdout + done.stderr
    golden = golden_of(manifest)
    assert golden["status"] == "no_golden"
    assert golden["path"] == GOLDEN_DIR.as_posix()
    assert golden["machine_class"] != "gpu-h100-x8"
    assert golden["golden_machine_class"] is None

    done, manifest = check(project, "--golden", str(other.relative_to(project)))
    golden = golden_of(manifest)
    assert golden["status"] == "same", done.stdout
    assert golden["golden_machine_class"] == "gpu-h100-x8"
    assert "recorded on `gpu-h100-x8`" in done.stdout

    other.write_text('{"format": 1}')
    done, manifest = check(project, "--golden", str(other.relative_to(project)))
    assert done.returncode == 2, done.stdout + done.stderr
    assert manifest["reasons"][0]["code"] == "golden"
    assert "not a golden trajectory" in done.stdout and "Traceback" not in done.stdout


def test_bless_refuses_a_gate_whose_runs_did_not_reproduce(project: Path) -> None:
    # Its own gate: the only training here whose runs do not reproduce.
    (project / "train.py").write_text(training().replace(
        "targets = torch.randn(64, 1)", "import os\ntargets = torch.randn(64, 1)"
        " + int.from_bytes(os.urandom(2), 'little') * 1e-6"))
    done, manifest = check(project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert golden_of(manifest) is None
    refused = run(project, "bless")
    assert refused.returncode == 4
    assert "did not reproduce" in refused.stderr and "Traceback" not in refused.stderr
    assert not (project / GOLDEN_DIR).exists()
