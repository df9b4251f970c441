"""`repro-gate attest --pushgateway-url` counts each signing in the gate's group on a real
Pushgateway: the group's other metrics stay, and a later gate push carries the count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.attestation_docs import write_gate, write_keys
from helpers.metrics_servers import Pushgateway

pytestmark = [pytest.mark.prometheus]

REPOSITORY = "octo/vision"
GROUP = {"job": "repro-gate", "repository": REPOSITORY, "gate": "repro-gate",
         "runner_slot": "default"}


def repro_gate(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("REPRO_GATE_", "INPUT_", "GITHUB_"))}
    environ.update(GITHUB_REPOSITORY=REPOSITORY, REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT="0")
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], env=environ,
                          capture_output=True, text=True, timeout=90, check=False)


def test_each_signing_is_counted_and_a_gate_push_keeps_the_count(
    tmp_path: Path, pushgateway: Pushgateway
) -> None:
    gate = write_gate(tmp_path / "out")
    keys = write_keys(tmp_path / "keys")
    push = ["push", "--manifest", str(gate.manifest_path), "--pushgateway-url", pushgateway.url]
    attest = ["attest", "--key", str(keys.private), "--manifest", str(gate.manifest_path),
              "--pushgateway-url", pushgateway.url]

    pushed = repro_gate(*push)
    assert pushed.returncode == 0, pushed.stderr
    assert pushgateway.value("repro_gate_attestations_total", GROUP) == 0
    first, second = repro_gate(*attest), repro_gate(*attest)

    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert second.stdout.splitlines()[-1] == (
        f"repro-gate: attestation counted at {pushgateway.url}"
        " (repro_gate_attestations_total 2)")
    assert pushgateway.value("repro_gate_attestations_total", GROUP) == 2
    assert pushgateway.value("repro_gate_runs_total", GROUP, verdict="pass") == 1

    again = repro_gate(*push, "--force")
    assert again.returncode == 0, again.stderr
    assert pushgateway.value("repro_gate_attestations_total", GROUP) == 2


def test_an_unreachable_gateway_is_a_warning_and_the_envelope_is_written(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "out")
    keys = write_keys(tmp_path / "keys")

    done = repro_gate("attest", "--key", str(keys.private), "--manifest",
                      str(gate.manifest_path), "--pushgateway-url", "http://127.0.0.1:9")

    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("repro-gate: warning: attestation not counted at"
                                  " http://127.0.0.1:9: ")
    assert (gate.output_dir / "attestation.dsse.json").is_file()
