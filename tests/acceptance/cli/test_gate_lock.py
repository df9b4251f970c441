"""One gate per output directory and working directory: real gates started together.

The CLI is wired as `with lock.hold(effective, args.wait): outcome = run_gate(...)` in `check`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

# Writes its token into the run directory and, like many scripts, into the working directory.
TRAIN = """\
import os, time
time.sleep(1.5)
token = os.environ["TOKEN"]
open(os.path.join(os.environ["REPRO_GATE_RUN_DIR"], "token.txt"), "w").write(token)
open("ckpt.bin", "w").write(token)
"""
REFUSED = re.compile(r"repro-gate: error: another repro-gate \(pid (\d+)\) is using (.+);"
                     r" wait for it or pass --wait")


def start(workdir: Path, token: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--json", "--no-cost",
         "--env", f"TOKEN={token}", "-a", "token.txt", "-a", "ckpt.bin", *args,
         "--", sys.executable, "train.py"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(gates: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each gate, once all have ended."""
    outputs = [gate.communicate(timeout=240) for gate in gates]
    return [(gate.returncode, out, err) for gate, (out, err) in zip(gates, outputs, strict=True)]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def assert_runs_are_its_own(manifest: dict, token: str) -> None:
    assert manifest["verdict"] == "pass", manifest["reasons"]
    for run in manifest["runs"]:
        assert {a["path"]: a["sha256"] for a in run["artifacts"]} == {
            "token.txt": digest(token), "ckpt.bin": digest(token)}, run


def interval(manifest: dict) -> tuple[datetime, datetime]:
    return (datetime.fromisoformat(manifest["started_at"]),
            datetime.fromisoformat(manifest["finished_at"]))


def test_second_gate_in_one_directory_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    gates = [start(tmp_path, "one"), start(tmp_path, "two")]
    results = finish(gates)
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    winner = next(i for i, (code, _, _) in enumerate(results) if code == 0)
    _, _, refused_stderr = results[1 - winner]
    lines = refused_stderr.strip().splitlines()
    assert len(lines) == 1, refused_stderr
    match = REFUSED.fullmatch(lines[0])
    assert match, lines[0]
    assert int(match.group(1)) == gates[winner].pid
    assert match.group(2) in (str(tmp_path), str(tmp_path / "repro-gate-out"))
    manifest = json.loads((tmp_path / "repro-gate-out" / "manifest.json").read_text())
    assert_runs_are_its_own(manifest, ["one", "two"][winner])


def test_with_wait_both_pass_in_turn(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    results = finish([start(tmp_path, "one", "--wait"), start(tmp_path, "two", "--wait")])
    assert [code for code, _, _ in results] == [0, 0], results
    manifests = [json.loads(stdout) for _, stdout, _ in results]
    for manifest, token in zip(manifests, ["one", "two"], strict=True):
        assert_runs_are_its_own(manifest, token)
    first, second = sorted(interval(manifest) for manifest in manifests)
    assert first[1] <= second[0], "the gates overlapped"
    waited = [stderr for _, _, stderr in results if "waiting for another repro-gate" in stderr]
    assert len(waited) == 1, [stderr for _, _, stderr in results]


def test_same_workdir_different_output_directories(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    results = finish([start(tmp_path, "one", "-o", "out1"), start(tmp_path, "two", "-o", "out2")])
    assert sorted(code for code, _, _ in results) == [0, 2], results
    refused = next(stderr for code, _, stderr in results if code == 2)
    match = REFUSED.fullmatch(refused.strip())
    assert match and match.group(2) == str(tmp_path), refused

    results = finish([start(tmp_path, "one", "-o", "out1", "--wait"),
                      start(tmp_path, "two", "-o", "out2", "--wait")])
    assert [code for code, _, _ in results] == [0, 0], results
    for (_, stdout, _), token in zip(results, ["one", "two"], strict=True):
        assert_runs_are_its_own(json.loads(stdout), token)

