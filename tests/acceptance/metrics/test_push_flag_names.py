"""`repro-gate push --pushgateway-url` (the name `check` uses) and the old `--url` both push."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.metrics_servers import Pushgateway, make_manifest

from repro_gate.manifest import store

pytestmark = [pytest.mark.prometheus]


@pytest.mark.parametrize("flag", ["--pushgateway-url", "--url"])
def test_push_flag_names(tmp_path: Path, pushgateway: Pushgateway, flag: str) -> None:
    path = store.write(make_manifest("pass", output_dir=tmp_path), tmp_path)
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("REPRO_GATE_", "INPUT_", "GITHUB_"))}
    environ["REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT"] = "0"
    completed = subprocess.run(
        [sys.executable, "-m", "repro_gate", "push", "--manifest", str(path), flag,
         pushgateway.url],
        env=environ, capture_output=True, text=True, timeout=90, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert f"metrics pushed to {pushgateway.url}" in completed.stdout
