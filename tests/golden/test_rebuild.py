"""When run G cannot run, the attribution says why in one line, and nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.config import Config
from repro_gate.environments import Environment
from repro_gate.golden.document import RunData
from repro_gate.golden.rebuild import rebuild_and_run

GOLDEN = {"software": {"commit": "0123456789abcdef", "lock": "aaa", "torch": "2.13.0"}}


def never_run(environment: Environment) -> RunData:
    raise AssertionError("run G must not run")


@pytest.mark.parametrize(("diff", "golden", "reason"), [
    ([{"field": "image", "golden": "img@sha256:1", "run": "img@sha256:2"}], GOLDEN,
     "the lock is the golden file's, so the software change is not one a lock rebuilds"),
    ([{"field": "lock", "golden": "aaa", "run": "bbb"},
      {"field": "torch", "golden": "2.13.0", "run": "2.14.1"}], GOLDEN,
     "the golden file's torch (2.13.0) is not rebuilt, only its lock (this run's: 2.14.1)"),
    ([{"field": "lock", "golden": "aaa", "run": "bbb"}], {"software": {"lock": "aaa"}},
     "the golden file names no commit, so its lock cannot be read"),
])
def test_software_a_lock_cannot_bring_back_is_not_rebuilt(
        tmp_path: Path, diff: list, golden: dict, reason: str) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    assert rebuild_and_run(config, golden, diff, never_run) == reason


def test_a_lock_missing_at_the_golden_commit_is_the_reason(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    diff = [{"field": "lock", "golden": "aaa", "run": "bbb"}]
    assert rebuild_and_run(config, GOLDEN, diff, never_run) == (
        "the golden file's software was not rebuilt: no uv.lock or requirements.txt at the"
        " golden file's commit 0123456789ab")
