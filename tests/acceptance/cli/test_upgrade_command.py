"""`repro-gate upgrade` end to end, as a user runs it: real uv, real environments built from
the local wheel index (tests/helpers/upgrade_index.py), a real tiny torch training in each.

The checks of the harmless upgrade run once, in turn on one project (`harmless`); each other
test is a scenario of its own, on its own project and environment cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.upgrade_index import PackageIndex, Templates, tree_digest

from repro_gate import validation
from repro_gate.launch.progress import ENV_STATUS_SECONDS
from repro_gate.manifest.upgrade_document import read_upgrade

TRAIN = """\
import torch
{imports}
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(16, 4) * numlib.SCALE
targets = torch.randn(16, 1)
for _ in range(6):
    optimizer.zero_grad()
    batch = harmless.identity(inputs){noise}
    loss = ((model(batch) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
"""


def write_training(project: Path, noisy: bool = False) -> None:
    imports = "import harmless\nimport numlib\n" + ("import noisy\n" if noisy else "")
    noise = " + noisy.jitter()" if noisy else ""
    (project / "train.py").write_text(TRAIN.format(imports=imports, noise=noise))


def upgrade(project: Path, index: PackageIndex, env_cache: Path, *args: str,
            timeout: float = 420, uv_env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`repro-gate upgrade` in `project`, packages from the local index only (or from where
    `uv_env` says)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "UV_NO_INDEX", "UV_FIND_LINKS", "UV_OFFLINE"))}
    env.update(uv_env if uv_env is not None else
               {"UV_NO_INDEX": "1", "UV_FIND_LINKS": str(index.path), "UV_OFFLINE": "1"})
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "upgrade", "--quiet", "--no-cost",
         "--inherit-site-packages", "--env-cache", str(env_cache), *args,
         "--", "python", "train.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def report(project: Path) -> dict:
    return read_upgrade(project / "repro-gate-out" / "upgrade.json")


@pytest.fixture
def trainer(make_project: Callable[[str], Path]) -> Path:
    project = make_project("uv-project")
    write_training(project)
    return project


def test_the_package_that_changes_the_numerics_is_named_alone(
        trainer: Path, package_index: PackageIndex, env_cache: Path) -> None:
    # Its own check: every package upgraded, and the culprit search that finds numlib.
    lock_before = (trainer / "uv.lock").read_bytes()
    done = upgrade(trainer, package_index, env_cache, "--upgrade")
    assert done.returncode == 1, done.stdout + done.stderr
    document = report(trainer)
    assert document["verdict"] == "changed"
    changed = {change["name"]: (change["old"], change["new"]) for change in document["changes"]}
    assert changed == {"numlib": ("1.0", "1.1"), "harmless": ("1.0", "1.1"),
                       "leaf": ("1.0", "1.1")}
    assert [culprit["name"] for culprit in document["culprits"]] == ["numlib"]
    culprit = document["culprits"][0]
    assert (culprit["old"], culprit["new"]) == ("1.0", "1.1")
    assert culprit["first_divergence"]["step"] == 1
    # The candidate's golden trajectory, for the lock-bump pull request to carry.
    golden = list((trainer / "repro-gate-out" / "golden").glob("*.json"))
    assert len(golden) == 1
    assert validation.errors("golden", json.loads(golden[0].read_text())) == []
    assert culprit["max_abs_diff"] > 0
    search = document["culprit_search"]
    assert search["status"] == "found"
    assert 1 <= search["runs"] <= search["max_runs"]
    assert document["bisect_runs"] == search["runs"]
    assert document["reproducibility"]["candidate"]["verdict"] == "pass"
    assert "numlib" in done.stdout and "1.1" in done.stdout
    assert "numlib" in (trainer / "repro-gate-out" / "upgrade.md").read_text()
    assert (trainer / "uv.lock").read_bytes() == lock_before  # no --write-lock
    kept = Path(document["candidate"]["lock"])
    assert kept.is_file() and 'version = "1.1"' in kept.read_text()


@dataclass
class Upgrade:
    """One `repro-gate upgrade` of the harmless sequence and what it left."""

    done: subprocess.CompletedProcess[str]
    seconds: float
    document: dict  # upgrade.json
    lock: str  # the project's uv.lock afterwards
    files: set[Path]  # the files in the output directory afterwards, resolved


@pytest.fixture(scope="module")
def harmless(templates: Templates, package_index: PackageIndex,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Upgrade]:
    """`--upgrade-package harmless` on one project with one environment cache, in turn: the
    first check, the same check again, again once the code is edited, again where the report
    cannot be written, and again with --write-lock. What each returned and wrote."""
    folder = tmp_path_factory.mktemp("harmless")
    trainer, env_cache = templates.copy("uv-project", folder), folder / "envs"
    write_training(trainer)

    def check(*args: str) -> Upgrade:
        started = time.monotonic()
        done = upgrade(trainer, package_index, env_cache, "--upgrade-package", "harmless",
                       *args)
        seconds = time.monotonic() - started
        files = {path.resolve() for path in (trainer / "repro-gate-out").rglob("*")
                 if path.is_file()}
        return Upgrade(done, seconds, report(trainer), (trainer / "uv.lock").read_text(), files)

    checks = {"first": check(), "again": check()}
    # the code changed: the gates run again
    (trainer / "train.py").write_text((trainer / "train.py").read_text() + "\n# edited\n")
    checks["edited"] = check()
    # upgrade.md cannot be written once the verdict is decided: a directory holds its name.
    blocked = trainer / "repro-gate-out" / "upgrade.md"
    blocked.unlink()  # the report of the checks before
    (blocked / "in-the-way").mkdir(parents=True)
    checks["blocked"] = check()
    shutil.rmtree(blocked)
    checks["write_lock"] = check("--write-lock")
    return checks


def test_a_harmless_upgrade_is_same_reuses_environments_and_writes_the_lock(
        harmless: dict[str, Upgrade]) -> None:
    first = harmless["first"]
    assert first.done.returncode == 0, first.done.stdout + first.done.stderr
    document = first.document
    assert document["verdict"] == "same"
    assert document["numerics"]["status"] == "same"
    assert {change["name"] for change in document["changes"]} == {"harmless", "leaf"}
    assert document["culprits"] == [] and document["culprit_search"]["status"] == "not_needed"
    again = harmless["write_lock"]
    assert again.done.returncode == 0, again.done.stdout + again.done.stderr
    document = again.document
    assert document["baseline"]["environment"]["reused"] is True
    assert document["candidate"]["environment"]["reused"] is True
    # --write-lock: the candidate replaces the project's lock, for the weekly pull request
    assert 'name = "harmless"\nversion = "1.1"' in again.lock
    assert 'name = "harmless"\nversion = "1.1"' not in first.lock


def test_a_candidate_that_makes_the_training_nondeterministic_is_not_reproducible(
        make_project: Callable[[str], Path], package_index: PackageIndex,
        env_cache: Path) -> None:
    # Its own check: the project that uses noisy.
    project = make_project("uv-noisy")
    write_training(project, noisy=True)
    done = upgrade(project, package_index, env_cache, "--upgrade-package", "noisy")
    assert done.returncode == 1, done.stdout + done.stderr
    document = report(project)
    assert document["verdict"] == "not_reproducible"
    assert document["reasons"][0]["code"] == "candidate_not_reproducible"
    assert document["reproducibility"]["baseline"]["verdict"] == "pass"
    assert document["reproducibility"]["candidate"]["verdict"] == "fail"


def test_a_broken_candidate_is_an_error_before_the_baseline_runs(
        trainer: Path, package_index: PackageIndex, env_cache: Path) -> None:
    # Its own check: a candidate lock that cannot be built.
    broken = trainer / "broken.lock"
    text = (trainer / "uv.lock").read_text()
    broken.write_text(text.replace('name = "numlib"\nversion = "1.0"',
                                   'name = "numlib"\nversion = "9.9"'))
    done = upgrade(trainer, package_index, env_cache, "--candidate-lock", "broken.lock")
    assert done.returncode == 2, done.stdout + done.stderr
    document = report(trainer)
    assert document["verdict"] == "error"
    assert document["reasons"][0]["code"] == "environment"
    assert "Traceback" not in done.stderr
    assert document["reproducibility"]["baseline"] is None  # both built before any run
    assert document["baseline"]["environment"]["lock_sha256"]
    assert ("kept: candidate lock" in done.stdout)


def test_missing_lock_and_missing_candidate_are_one_line_errors(
        tmp_path: Path, package_index: PackageIndex, env_cache: Path,
        trainer: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = upgrade(tmp_path, package_index, env_cache, "--upgrade")
    assert done.returncode == 2
    assert "uv.lock" in done.stdout and "Traceback" not in done.stdout + done.stderr
    assert json.loads((tmp_path / "repro-gate-out" / "upgrade.json").read_text())[
        "reasons"][0]["code"] == "lockfile"
    before = tree_digest(trainer, trainer / "repro-gate-out")
    nothing = subprocess.run(
        [sys.executable, "-m", "repro_gate", "upgrade", "--", sys.executable, "train.py"],
        cwd=trainer, capture_output=True, text=True, check=False)
    assert nothing.returncode == 2
    assert "nothing to compare" in nothing.stderr and "Traceback" not in nothing.stderr
    assert tree_digest(trainer, trainer / "repro-gate-out") == before
    assert read_upgrade(trainer / "repro-gate-out" / "upgrade.json")["verdict"] == "error"


def test_a_change_within_the_upgrade_tolerance_is_same(
        trainer: Path, package_index: PackageIndex, env_cache: Path) -> None:
    # Its own check: numlib's upgrade, under a tolerance.
    done = upgrade(trainer, package_index, env_cache, "--upgrade-package", "numlib",
                   "--upgrade-tolerance", "atol=1e-5,rtol=1e-5")
    assert done.returncode == 0, done.stdout + done.stderr
    document = report(trainer)
    assert document["verdict"] == "same"
    assert document["numerics"]["status"] == "within_tolerance"
    assert document["numerics"]["tolerance"] == {"atol": 1e-5, "rtol": 1e-5}


def test_a_cancel_during_the_candidate_gate_is_an_error_that_keeps_the_baseline(
        trainer: Path, package_index: PackageIndex, env_cache: Path) -> None:
    # Its own check: a training that hangs in the candidate, cancelled.
    # The candidate's numlib (SCALE 0.5000001) makes the training hang until it is killed.
    (trainer / "train.py").write_text(
        "import time\nimport numlib\nif numlib.SCALE != 0.5:\n"
        "    print('candidate started', flush=True)\n    time.sleep(600)\n"
        + (trainer / "train.py").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env.update({"UV_NO_INDEX": "1", "UV_FIND_LINKS": str(package_index.path),
                "UV_OFFLINE": "1"})
    gate = subprocess.Popen(
        [sys.executable, "-m", "repro_gate", "upgrade", "--quiet", "--no-cost",
         "--inherit-site-packages", "--env-cache", str(env_cache), "--upgrade-package",
         "numlib", "--", "python", "train.py"],
        cwd=trainer, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = trainer / "repro-gate-out" / "upgrade" / "candidate" / "logs" / "A.log"
    deadline = time.monotonic() + 400
    while not (log.is_file() and "candidate started" in log.read_text(errors="replace")):
        assert gate.poll() is None, gate.communicate()
        assert time.monotonic() < deadline, "the candidate's run A never started"
        time.sleep(0.2)
    gate.send_signal(signal.SIGTERM)
    stdout, stderr = gate.communicate(timeout=30)
    assert gate.returncode == 2, stdout + stderr
    document = report(trainer)
    assert document["verdict"] == "error"
    assert document["reasons"][0]["code"] == "cancelled"
    assert "SIGTERM" in document["reasons"][0]["message"]
    assert document["reproducibility"]["baseline"]["verdict"] == "pass"
    assert Path(document["reproducibility"]["baseline"]["manifest"]).is_file()
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize("lock_name", ["requirements.txt", "locks/prod-pins.txt"])
def test_a_requirements_lock_of_any_name_is_recorded_with_a_valid_report(
        make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
        lock_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A check per lock name: each builds its environments and runs its gates (status lines).
    monkeypatch.setenv(ENV_STATUS_SECONDS, "0.2")  # status lines from the first 0.2 s on
    project = make_project("requirements-bare")
    write_training(project)
    lock = project / lock_name
    lock.parent.mkdir(exist_ok=True)
    (project / "requirements.txt").rename(lock)
    candidate = project / "candidate.txt"
    candidate.write_text("numlib==1.0\nharmless==1.1\nleaf==1.1\n")
    done = upgrade(project, package_index, env_cache, "--lock", lock_name,
                   "--candidate-lock", "candidate.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    out = project / "repro-gate-out"
    assert not (out / "upgrade.invalid.json").exists()
    document = report(project)
    assert document["verdict"] == "same"
    assert (document["baseline"]["format"], document["candidate"]["format"]) == (
        "requirements", "requirements")
    assert Path(document["baseline"]["lock"]).name == Path(lock_name).name
    assert "harmless" in (out / "upgrade.md").read_text()
    # never in silence: the environments' builds and every run say how they are doing
    assert re.search(r"^\[baseline environment\] repro-gate: building the baseline environment"
                     r" \(3 pinned packages\): \d+ packages? installed, \d+\.\d MB, \d+ s elapsed$",
                     done.stderr, re.MULTILINE), done.stderr
    assert re.search(r"^\[candidate B\] repro-gate: .*elapsed", done.stderr, re.MULTILINE)


def test_a_report_that_cannot_be_written_is_an_error_recorded_in_its_place(
        harmless: dict[str, Upgrade]) -> None:
    # upgrade.md cannot be written once the verdict is decided: a directory holds its name.
    blocked = harmless["blocked"]
    done = blocked.done
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    document = blocked.document  # valid against its schema
    assert document["verdict"] == "error"
    (reason,) = document["reasons"]
    assert reason["code"] == "output_dir"
    assert reason["message"].startswith("the upgrade report was not written (upgrade.md): ")
    # what the check found is kept beside the error
    assert document["reproducibility"]["candidate"]["verdict"] == "pass"
    assert document["numerics"]["status"] == "same"


def requirements_project(make_project: Callable[[str], Path], candidate: str) -> Path:
    project = make_project("requirements-bare")
    write_training(project)
    (project / "candidate.txt").write_text(candidate)
    return project


@pytest.mark.parametrize(("candidate", "code", "words"), [
    ("numlib==9.9.9\nharmless==1.0\nleaf==1.0\n", "environment", "numlib"),
    ("numlib==1.0\nharmless==1.1\nleaf==1.0\n", "lock_unresolvable", "leaf"),
])
def test_a_candidate_that_cannot_be_built_fails_before_any_run(
        make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
        candidate: str, code: str, words: str) -> None:
    project = requirements_project(make_project, candidate)
    started = time.monotonic()
    done = upgrade(project, package_index, env_cache, "--candidate-lock", "candidate.txt")
    took = time.monotonic() - started
    assert done.returncode == 2, done.stdout + done.stderr
    document = report(project)
    # nothing ran: the baseline's gate never started
    assert document["reproducibility"]["baseline"] is None and document["runs"] == []
    assert not (project / "repro-gate-out" / "upgrade" / "baseline").exists()
    assert took < 30, took
    (reason,) = document["reasons"]
    assert reason["code"] == code and words in reason["message"]
    # one line on the console, uv's own explanation in the record
    assert "\n" not in reason["message"] and reason.get("detail")
    assert f"{code}: " in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def refused_url() -> str:
    """An index on a loopback port where nothing listens: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"


def test_an_index_that_refuses_connections_is_index_unreachable(
        make_project: Callable[[str], Path], package_index: PackageIndex,
        env_cache: Path) -> None:
    project = requirements_project(make_project, "")
    url = refused_url()
    done = upgrade(project, package_index, env_cache, "--upgrade",
                   uv_env={"UV_INDEX_URL": url, "UV_HTTP_RETRIES": "0"})
    assert done.returncode == 2, done.stdout + done.stderr
    (reason,) = report(project)["reasons"]
    assert reason["code"] == "index_unreachable", reason
    assert "cannot be reached" in reason["message"] and "127.0.0.1" in reason["message"]
    assert "index_unreachable" in done.stdout


def test_an_identical_check_reuses_both_gate_results(harmless: dict[str, Upgrade]) -> None:
    first, again = harmless["first"], harmless["again"]
    assert first.done.returncode == 0, first.done.stdout + first.done.stderr
    assert first.document["reproducibility"]["baseline"]["reused"] is False
    assert again.done.returncode == 0, again.done.stdout + again.done.stderr
    document = again.document
    for role in ("baseline", "candidate"):
        summary = document["reproducibility"][role]
        assert summary["reused"] is True and len(summary["cache_key"]) == 64
        assert f"the {role} gate: reused its result from the cache" in again.done.stderr
        assert Path(summary["manifest"]).resolve() in again.files
    assert document["numerics"]["status"] == "same" and document["verdict"] == "same"
    assert again.seconds < first.seconds / 2, (first.seconds, again.seconds)
    # the code changed: the gates run again
    edited = harmless["edited"]
    assert edited.done.returncode == 0, edited.done.stdout + edited.done.stderr
    assert edited.document["reproducibility"]["baseline"]["reused"] is False


def test_a_check_that_compared_nothing_never_says_bit_for_bit(
        make_project: Callable[[str], Path], package_index: PackageIndex,
        env_cache: Path) -> None:
    # Its own check: two locks that pin the same versions.
    project = requirements_project(make_project, "numlib==1.0\nharmless==1.0\nleaf==1.0\n")
    done = upgrade(project, package_index, env_cache, "--candidate-lock", "candidate.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report(project)["numerics"]["status"] == "not_compared"
    assert done.stdout.splitlines()[0] == ("repro-gate upgrade: SAME: nothing was compared:"
                                           " the two locks pin the same versions")
    assert "bit for bit" not in done.stdout
    assert "bit for bit" not in (project / "repro-gate-out" / "upgrade.md").read_text()


def test_an_unreachable_index_ends_the_culprit_search_instead_of_skipping(
        make_project: Callable[[str], Path], package_index: PackageIndex,
        env_cache: Path) -> None:
    # Its own project and cache: the second check may find only the first one's results there.
    project = requirements_project(make_project, "numlib==1.1\nharmless==1.1\nleaf==1.1\n")
    # Both environments built (and both gates cached) while the index is there; under this
    # tolerance the numerics are the same, so no search runs.
    first = upgrade(project, package_index, env_cache, "--candidate-lock", "candidate.txt",
                    "--upgrade-tolerance", "atol=1e-3,rtol=1e-3")
    assert first.returncode == 0, first.stdout + first.stderr
    # Bitwise they changed: the search needs mixtures the cache does not hold, and the index
    # now refuses every connection.
    done = upgrade(project, package_index, env_cache, "--candidate-lock", "candidate.txt",
                   uv_env={"UV_INDEX_URL": refused_url(), "UV_HTTP_RETRIES": "0"})
    assert done.returncode == 2, done.stdout + done.stderr
    document = report(project)
    (reason,) = document["reasons"]
    assert reason["code"] == "index_unreachable", reason
    assert document["culprit_search"]["trials"] == []  # no trial counted as a skip
    assert document["numerics"]["status"] == "changed"


def test_the_upgrade_check_never_runs_the_resume_check(
        trainer: Path, package_index: PackageIndex, env_cache: Path) -> None:
    # Its own project and cache: the gate cache's key leaves the resume out, so a result read
    # back from the harmless checks' cache would show nothing of it.
    # The training writes no checkpoint: a resume check would end in `no_checkpoint`.
    result = upgrade(trainer, package_index, env_cache, "--upgrade-package", "harmless",
                     "--resume-after", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    for role in ("baseline", "candidate"):
        path = trainer / "repro-gate-out" / "upgrade" / role / "manifest.json"
        manifest = json.loads(path.read_text())
        assert manifest["comparison"]["resume"] is None
        assert [run["name"] for run in manifest["runs"]] == ["A", "B"]
