"""`repro-gate diff` through the command line: exit codes, lines, JSON, auto-detection."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

from helpers.gate_cli import CLI
from helpers.paths import FIXTURES, MANIFEST_FAIL

from repro_gate import validation

# A complete manifest of a real shape, to carry another fingerprint.
MANIFEST = MANIFEST_FAIL


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def fingerprint_document(tmp_path: Path) -> dict:
    """`repro-gate fingerprint --json` of a small project (no git, two data files)."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    for index in range(2):
        (project / "data" / f"part-{index}.txt").write_text(f"{index}\n", encoding="utf-8")
    (project / "uv.lock").write_bytes((FIXTURES / "lockfiles" / "uv.lock").read_bytes())
    (project / ".repro-gate.yml").write_text("seed: 3\ndata: [data]\n", encoding="utf-8")
    done = run_cli("fingerprint", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def write(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def changed_copy(document: dict) -> dict:
    """The same environment after a driver, torch, lock and data upgrade."""
    new = copy.deepcopy(document)
    fp = new["fingerprint"]
    fp["hardware"]["driver_version"] = "560.28.03"
    fp["env"]["torch"] = "2.4.0"
    lock = fp["env"]["lockfiles"][0]
    lock["sha256"] = "0" * 64
    lock["pins"].update(numpy=["2.1.0"], rich=["13.7.1"])
    lock["pins"].pop("sample-trainer")
    data = fp["data"]["paths"][0]
    data["sha256"] = "1" * 64
    data["file_sha256"]["part-0.txt"] = "2" * 64
    data["file_sha256"]["part-2.txt"] = "3" * 64
    data["files"] = 3
    return new


def test_equal_environments_exit_0(tmp_path: Path) -> None:
    document = fingerprint_document(tmp_path)
    a = write(tmp_path / "a.json", document)
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    manifest.pop("environment_diff")
    manifest.update(config_hash=document["config_hash"], fingerprint=document["fingerprint"])
    b = write(tmp_path / "manifest.json", manifest)
    done = run_cli("diff", str(a), str(b))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"environments are equal (config_hash {document['config_hash'][:12]})\n"


def test_changes_are_listed_by_category_and_exit_1(tmp_path: Path) -> None:
    document = fingerprint_document(tmp_path)
    a = write(tmp_path / "a.json", document)
    b = write(tmp_path / "b.json", changed_copy(document))
    done = run_cli("diff", str(a), str(b))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("4 changes (config_hash ")
    assert lines[1:] == [
        "data:",
        "  data/ 1 file changed (part-0.txt), 1 file added (part-2.txt)",
        "env:",
        f"  torch {document['fingerprint']['env']['torch']} -> 2.4.0",
        "  lockfile uv.lock: 1 package changed (numpy 2.0.1 -> 2.1.0),"
        " 1 package added (rich 13.7.1), 1 package removed (sample-trainer 0.1.0)",
        "hardware:",
        "  driver unknown -> 560.28.03",
    ]


def test_json_output_validates(tmp_path: Path) -> None:
    document = fingerprint_document(tmp_path)
    a = write(tmp_path / "a.json", document)
    b = write(tmp_path / "b.json", changed_copy(document))
    done = run_cli("diff", "--json", str(a), str(b))
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert validation.errors("environment-diff", result) == []
    assert result["counts"] == {"code": 0, "data": 1, "env": 2, "random": 0, "hardware": 1}
    driver = next(c for c in result["changes"] if c["field"] == "hardware.driver_version")
    assert (driver["old"], driver["new"]) == (None, "560.28.03")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    document = fingerprint_document(tmp_path)
    good = write(tmp_path / "a.json", document)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{oops", encoding="utf-8")
    old_manifest = write(tmp_path / "old.json", {"schema_version": 1, "tool": {}})
    cases = [
        (tmp_path / "missing.json", "missing.json: file not found"),
        (garbage, "garbage.json: not valid JSON (line 1)"),
        (old_manifest, "old.json: manifest (schema_version 1) has no fingerprint"),
    ]
    for path, message in cases:
        done = run_cli("diff", str(good), str(path))
        assert done.returncode == 2
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1
        assert done.stderr.startswith("repro-gate: error: ")
        assert message in done.stderr
