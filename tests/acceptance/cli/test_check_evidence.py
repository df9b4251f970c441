"""No PASS without evidence: a Python training must run under the probe (its own PYTHONPATH
prefix keeps it in); a program that is not Python can pass on its compared files alone, and says
so with the reason; with no files compared, a run the probe did not see is an error."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import Result, assert_one_line_error, check

from repro_gate import validation

PYTHON = sys.executable
NOT_OBSERVED = "from artifacts only: no steps observed, determinism not applied"
NO_STEPS = "from artifacts only: no steps observed"
# Why the probe did not load in a shell script's runs, as the verdict's reason says.
SH_NOT_PYTHON = (
    "the probe did not load in run A and run B: sh is not Python and started no Python that"
    " loaded the probe; run the training with python, or have sh start it without -I/-S/-E and"
    " with the gate's PYTHONPATH"
)


def repro_gate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Another `repro-gate` command, outside GitHub Actions."""
    return subprocess.run(
        [PYTHON, "-m", "repro_gate", *args], cwd=cwd,
        env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        capture_output=True, text=True, timeout=60, check=False,
    )


def assert_passed(result: Result) -> dict:
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    assert manifest["verdict"] == "pass"
    assert validation.errors("manifest", manifest) == []
    return manifest


def assert_probe_not_loaded(result: Result, *needles: str) -> dict:
    manifest = assert_one_line_error(result, "probe_not_loaded", *needles)
    (reason,) = manifest["reasons"]
    assert reason["message"].startswith("the probe did not load in run A: ")
    # Nothing can be compared after run A: the gate stops there.
    assert [run["name"] for run in manifest["runs"]] == ["A"]
    return manifest


def test_an_isolated_python_is_probe_not_loaded_even_with_artifacts(project: Path) -> None:
    # Its own gate: python -I, with an artifact that would compare equal.
    result = check(project, "--no-cost", "-a", "model.pt", "--", PYTHON, "-I", "isolated.py")
    manifest = assert_probe_not_loaded(result, "python -I ignores PYTHONPATH", "drop -I")
    assert "or compare files only" not in manifest["reasons"][0]["message"]


def test_a_pythonpath_prefix_keeps_the_probe(project: Path) -> None:
    # Its own gate: a training whose model lives in lib/, found through PYTHONPATH=lib.
    (project / "lib").mkdir()
    (project / "lib" / "tinylib.py").write_text(
        "import torch\n\n"
        "def train(steps):\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Linear(4, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    data = torch.randn(16, 4)\n"
        "    for _ in range(steps):\n"
        "        optimizer.zero_grad()\n"
        "        model(data).pow(2).mean().backward()\n"
        "        optimizer.step()\n"
    )
    (project / "train_lib.py").write_text("import tinylib\n\ntinylib.train(steps=3)\n")

    result = check(project, "--no-cost", "--command",
                   f"PYTHONPATH=lib {shlex.quote(PYTHON)} train_lib.py")

    manifest = assert_passed(result)
    assert manifest["evidence"] == {"probe_loaded": True, "steps_observed": True}
    assert [run["steps"] for run in manifest["runs"]] == [3, 3]
    assert "from artifacts only" not in result.stdout


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        (["--", "env", "-u", "PYTHONPATH", PYTHON, "isolated.py", "--no-save"],
         "the command unsets PYTHONPATH"),
        (["--command", f"sh -c 'PYTHONPATH= {PYTHON} isolated.py --no-save'"],
         "the command replaces PYTHONPATH where the gate cannot put the probe's folder"),
        (["--", PYTHON, "-S", "-c", "print('trained')"], "python -S skips sitecustomize"),
    ],
    ids=["env-u", "quoted-assignment", "no-site"],
)
def test_a_python_that_skips_the_probe_is_named(
    project: Path, command: list[str], needle: str
) -> None:
    # A gate per command: each keeps the probe out in its own way.
    assert_probe_not_loaded(check(project, "--no-cost", *command), needle)


def test_a_training_without_an_optimizer_passes_from_artifacts_only(project: Path) -> None:
    # Its own gate: a training that updates its weights by hand.
    result = check(project, "--no-cost", "--", PYTHON, "hand_update.py")
    manifest = assert_passed(result)
    assert [run["steps"] for run in manifest["runs"]] == [0, 0]
    assert manifest["evidence"] == {"probe_loaded": True, "steps_observed": False}
    assert f"PASS: reproducible, {NO_STEPS}\n" in result.stdout
    assert manifest["reasons"][0]["message"].endswith(f"({NO_STEPS})")
    assert "determinism not applied" not in result.stdout


def test_a_shell_script_training_is_judged_by_its_file(project: Path) -> None:
    # Two gates of shell scripts (no torch): one with a file to compare, one without.
    (project / "train.sh").write_text("printf 'weights 1\\n' > model.bin\n")
    result = check(project, "--no-cost", "-a", "model.bin", "--", "sh", "train.sh")
    manifest = assert_passed(result)
    assert manifest["evidence"] == {"probe_loaded": False, "steps_observed": False}
    (reason,) = manifest["reasons"]
    assert reason["message"] == (
        f"2 runs are bitwise equal: 1 artifacts ({NOT_OBSERVED}); {SH_NOT_PYTHON}")
    assert f"PASS: reproducible, {NOT_OBSERVED}" in result.stdout
    assert SH_NOT_PYTHON in result.stdout
    # The comment, the check run's title and summary, and the job summary say it too.
    manifest_path = project / "repro-gate-out" / "manifest.json"
    preview = repro_gate("report", "--manifest", str(manifest_path), "--markdown")
    assert preview.returncode == 0, preview.stderr
    sections = re.split(r"^## .+\n\n", preview.stdout, flags=re.MULTILINE)[1:]
    assert len(sections) == 4
    for section in sections:
        assert f"bit-for-bit reproducible · {NOT_OBSERVED}" in section
    # No step was observed: no golden trajectory to compare with, and nothing to bless.
    assert manifest["comparison"]["golden"] is None
    blessed = repro_gate("bless", "--manifest", str(manifest_path), cwd=project)
    assert blessed.returncode == 4, blessed.stdout + blessed.stderr
    assert blessed.stderr.count("\n") == 1 and "Traceback" not in blessed.stderr
    assert "no optimizer step of its runs was observed" in blessed.stderr
    assert not (project / ".repro-gate" / "golden").exists()

    (project / "log.sh").write_text("echo trained > log.txt\n")
    assert_probe_not_loaded(check(project, "--no-cost", "--", "sh", "log.sh"),
                            "sh is not Python", "or compare files only")


def test_an_observed_training_passes_without_a_qualifier(project: Path) -> None:
    # Its own gate: the one training here that the probe observes step by step.
    result = check(project, "--no-cost", "--", PYTHON, "deterministic.py")
    manifest = assert_passed(result)
    assert manifest["evidence"] == {"probe_loaded": True, "steps_observed": True}
    assert "from artifacts only" not in result.stdout
    assert manifest["reasons"][0]["message"].startswith("2 deterministic runs are bitwise equal")


def test_a_shell_script_whose_file_differs_fails_from_artifacts_only(project: Path) -> None:
    # Its own gate: a shell script whose file differs run to run.
    (project / "noisy.sh").write_text("od -An -N8 -tx8 /dev/urandom > model.bin\n")
    result = check(project, "--no-cost", "-a", "model.bin", "--", "sh", "noisy.sh")
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert f"FAIL: not reproducible, {NOT_OBSERVED}\n" in result.stdout
    (reason,) = manifest["reasons"]
    assert reason["code"] == "artifact_different"
    assert reason["message"] == (
        f"model.bin differs between runs A and B ({NOT_OBSERVED}); {SH_NOT_PYTHON}")
