"""Gates of trainings that try to cheat (tests/trainings/cheat_*.py), and what each must show:
no PASS, and why. Shared by the local and the Docker scenarios, which differ only in the
launcher's flags."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers.gate_cli import Result, check
from helpers.paths import TRAININGS
from repro_gate import validation

# The gate's flags and the training of each scenario. The seed handoff keeps the default
# configuration (fail-fast on, the output folder inside the workspace); the probe-folder link
# closes those channels first (--no-fail-fast, an output folder outside the workspace), as an
# attacker who found them closed would.
Scenario = tuple[tuple[str, ...], str]
HANDOFF: Scenario = (("--no-cost",), "cheat_seed_handoff.py")
FORGE: Scenario = (("--no-cost", "--no-fail-fast"), "cheat_copy_forge.py")
LINK: Scenario = (("--no-cost", "--no-fail-fast"), "cheat_probe_link.py")


def project(folder: Path) -> Path:
    """A workspace with the cheating trainings and the tiny training they share."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # readable by a container's unprivileged user
    for name in ("tiny.py", "cheat_seed_handoff.py", "cheat_copy_forge.py",
                 "cheat_probe_link.py"):
        shutil.copy(TRAININGS / name, folder / name)
    return folder


def gate(workspace: Path, scenario: Scenario, python: str, *launcher: str,
         output: Path | None = None) -> tuple[Result, dict[str, Any]]:
    """One gate of `scenario`, its training run by `python`; its result and manifest."""
    flags, training = scenario
    where = ("--output-dir", str(output)) if output is not None else ()
    result = check(workspace, *launcher, *where, *flags, "--", python, training)
    manifest = json.loads(((output or workspace / "repro-gate-out") / "manifest.json")
                          .read_text())
    assert validation.errors("manifest", manifest) == []
    assert "Traceback" not in result.stdout + result.stderr
    return result, manifest


def log(manifest: dict[str, Any], run: str) -> str:
    return (Path(manifest["output_dir"]) / "logs" / f"{run}.log").read_text()


def assert_no_seed_handed_off(result: Result, manifest: dict[str, Any]) -> None:
    """Run B found no seed of run A's (no reference, no run A, no log in its view), drew its
    own, and the gate failed at the first step, stopping run B there (fail-fast)."""
    output = result.stdout + result.stderr
    assert (result.exit_code, manifest["verdict"]) == (1, "fail"), output
    assert "handoff seen: False" in log(manifest, "A")
    assert "handoff seen: False" in log(manifest, "B")
    assert manifest["comparison"]["first_divergence"]["step"] == 1
    assert manifest["runs"][1]["stopped"] == "divergence"


WORKFLOW_COMMAND_NAME = "x\n::notice title=repro-gate::PASS reproducible\n"


def assert_no_copy_and_the_clash_compared(result: Result, manifest: dict[str, Any]) -> None:
    """Run B could not see run A to copy it, trained on its own, and both of its model.pt
    (the decoy in its run folder, the random one in its working copy) were compared."""
    output = result.stdout + result.stderr
    assert (result.exit_code, manifest["verdict"]) == (1, "fail"), output
    assert "run A not visible: FileNotFoundError" in log(manifest, "B")
    statuses = {item["path"]: item["status"] for item in manifest["comparison"]["artifacts"]}
    assert statuses == {"model.pt": "equal", "work/model.pt": "different",
                        WORKFLOW_COMMAND_NAME: "equal"}
    assert "the same artifact name in the run directory and the working copy" in result.stderr
    # A file named like a workflow command is one escaped line: no line the runner acts on.
    assert not [line for line in output.splitlines() if line.lstrip().startswith("::")]
    assert WORKFLOW_COMMAND_NAME.replace("\n", "\\n") in result.stdout


def assert_link_is_tampering(result: Result, manifest: dict[str, Any], output: Path) -> None:
    """Run B's probe folder is a link to run A's: the error `run_tampered` naming it, exit 5,
    and run A's records left as they were."""
    assert (result.exit_code, manifest["verdict"]) == (5, "error"), result.stdout + result.stderr
    (reason,) = manifest["reasons"]
    assert reason["code"] == "run_tampered"
    assert str(output / "runs" / "B" / ".repro-gate") in reason["message"]
    assert "linked run A's records" in log(manifest, "B")
