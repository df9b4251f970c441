"""Running `repro-gate` as a user would, for the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CLI = Path(sys.executable).parent / "repro-gate"  # the installed console script
# Two ranks under torchrun, as a user starts a multi-process training.
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    workdir: Path

    @property
    def manifest(self) -> dict:
        return json.loads((self.workdir / "repro-gate-out" / "manifest.json").read_text())


def check(workdir: Path, *args: str, timeout: float = 240) -> Result:
    """Run `repro-gate check` as a user would, in `workdir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    completed = subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr, workdir)


def script(name: str) -> list[str]:
    return ["--", sys.executable, name]


def assert_one_line_error(result: Result, code: str, *needles: str) -> dict:
    """The gate ended in the error `code`: exit 2, no traceback, a valid error manifest whose
    reason is one line holding each of `needles` (which the output shows too)."""
    from repro_gate import validation

    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["verdict"] == "error"
    reason = manifest["reasons"][0]
    assert reason["code"] == code
    assert "\n" not in reason["message"]
    for needle in needles:
        assert needle in reason["message"] and needle in output, output
    return manifest


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `repro-gate compare ARGS` as a user would."""
    return subprocess.run([sys.executable, "-m", "repro_gate", "compare", *args],
                          capture_output=True, text=True, timeout=120, check=False)
