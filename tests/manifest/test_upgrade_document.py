"""`upgrade.json`: masked, validated and written atomically; read back validated; its schema
resolvable by a standard tool and in step with the manifest's run entries and error kinds."""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers.check_jsonschema import CHECK_JSONSCHEMA, OFFLINE
from helpers.paths import ROOT

from repro_gate import validation
from repro_gate.errors import ErrorKind, GateError
from repro_gate.manifest.upgrade_document import (
    UPGRADE_FILE,
    UPGRADE_SCHEMA_VERSION,
    read_upgrade,
    write_upgrade,
)

SHA = "0f" * 32
SECRET = "ghs_upgradeSecret1234"


def upgrade_document(verdict: str = "changed") -> dict[str, Any]:
    """An upgrade.json of a numerics change found in one package, with a trial run."""
    run = {"name": "A", "mode": "deterministic", "exit_code": 0, "wall_seconds": 2.0,
           "steps": 4, "log_path": "logs/A.log", "run_dir": "runs/A", "timed_out": False,
           "stopped": None, "artifacts": [{"path": "model.pt", "sha256": SHA, "bytes": 10}]}
    divergence = {"step": 2, "parameters": ["fc.weight"], "runs": ["A", "trial-1"],
                  "cause": "forward", "loss_differs": True}
    document = {
        "schema_version": UPGRADE_SCHEMA_VERSION,
        "tool": {"name": "repro-gate", "version": "0.9.0"},
        "gate": "train", "verdict": verdict,
        "started_at": "2026-11-23T10:00:00Z", "finished_at": "2026-11-23T10:01:00Z",
        "reasons": [{"code": "numerics_changed", "message": "numerics changed at step 2"}],
        "output_dir": "repro-gate-out",
        "baseline": {"lock": "uv.lock", "format": "uv.lock", "sha256": SHA, "environment": None},
        "candidate": {"lock": None, "format": "uv.lock", "sha256": None, "source": "given",
                      "upgrade": [], "environment": None},
        "changes": [{"name": "mathlib", "old": "1.0", "new": "1.1", "kind": "upgraded",
                     "direct": True, "applies": True}],
        "numerics": {"status": "changed", "tolerance": "bitwise",
                     "comparison": {"basis": "bitwise", "artifacts": [],
                                    "trajectory": {"steps_compared": 2, "status": "different"},
                                    "first_divergence": divergence}},
        "reproducibility": {"baseline": {"verdict": "pass", "manifest": "b/manifest.json",
                                         "reasons": [{"code": "bitwise_equal", "message": "ok"}],
                                         "cost": {"status": "measured", "pct": 1.0,
                                                  "ci95_pct": [0.5, 1.5]}},
                            "candidate": None, "new_nondeterministic_ops": []},
        "culprits": [{"name": "mathlib", "old": "1.0", "new": "1.1", "kind": "upgraded",
                      "group": 0, "first_divergence": divergence, "max_abs_diff": 0.5,
                      "max_rel_diff": None, "max_ulp_diff": 3, "artifact": "model.pt"}],
        "culprit_search": {"status": "found", "runs": 1, "max_runs": 32,
                           "trials": [{"packages": ["mathlib"], "outcome": "changed", "step": 2}]},
        "bisect_runs": 1,
        "fingerprint_diff": {"equal": False, "old_config_hash": SHA, "new_config_hash": SHA,
                             "changes": [{"category": "env", "field": "env.mathlib", "old": "1.0",
                                          "new": "1.1", "message": "mathlib 1.0 -> 1.1"}],
                             "counts": {"code": 0, "data": 0, "env": 1, "random": 0,
                                        "hardware": 0}},
        "runs": [{**run, "environment": "baseline"},
                 {**run, "name": "trial-1", "environment": "trial", "packages": ["mathlib"]}],
    }
    assert validation.errors("upgrade", document) == []
    return document


def listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_valid_document_round_trips(tmp_path: Path) -> None:
    document = upgrade_document()
    path = write_upgrade(document, tmp_path / "out")
    assert path == tmp_path / "out" / UPGRADE_FILE
    assert read_upgrade(path) == document
    assert listing(tmp_path / "out") == [UPGRADE_FILE]


def test_an_invalid_document_is_refused_in_one_line_and_kept_aside(tmp_path: Path) -> None:
    write_upgrade(upgrade_document(), tmp_path)
    before = (tmp_path / UPGRADE_FILE).read_bytes()
    document = upgrade_document()
    document["culprits"][0]["group"] = -1
    document["verdict"] = "maybe"
    with pytest.raises(GateError) as raised:
        write_upgrade(document, tmp_path)
    assert raised.value.kind == ErrorKind.MANIFEST_INVALID
    assert raised.value.message == (
        "upgrade.json: does not match the upgrade report's schema: culprits[0].group: must be an"
        " integer >= 0 (and 1 more)")
    assert (tmp_path / UPGRADE_FILE).read_bytes() == before
    assert json.loads((tmp_path / "upgrade.invalid.json").read_text())["verdict"] == "maybe"


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_partial_one(tmp_path: Path
                                                                          ) -> None:
    write_upgrade(upgrade_document(), tmp_path)
    before = (tmp_path / UPGRADE_FILE).read_bytes()
    document = upgrade_document()
    # A number the schema accepts but JSON cannot encode: the dump fails after writing a part.
    document["culprits"][0]["max_abs_diff"] = Decimal("0.5")
    with pytest.raises(TypeError):
        write_upgrade(document, tmp_path)
    assert (tmp_path / UPGRADE_FILE).read_bytes() == before
    assert listing(tmp_path) == [UPGRADE_FILE]


def test_a_credential_never_reaches_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    document = upgrade_document("error")
    document["reasons"] = [{"code": "lock_unresolvable",
                            "message": f"uv: https://x:{SECRET}@index.example/simple is down"}]
    path = write_upgrade(document, tmp_path)
    assert SECRET not in path.read_text()
    assert read_upgrade(path)["reasons"][0]["message"] == (
        "uv: https://x:***@index.example/simple is down")


def test_reading_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(GateError) as missing:
        read_upgrade(tmp_path / UPGRADE_FILE)
    assert missing.value.kind == ErrorKind.MANIFEST_MISSING
    newer = {**upgrade_document(), "schema_version": UPGRADE_SCHEMA_VERSION + 1}
    (tmp_path / UPGRADE_FILE).write_text(json.dumps(newer))
    with pytest.raises(GateError) as too_new:
        read_upgrade(tmp_path / UPGRADE_FILE)
    assert too_new.value.kind == ErrorKind.MANIFEST_VERSION
    (tmp_path / UPGRADE_FILE).write_text('{"verdict": "same"')
    with pytest.raises(GateError) as broken:
        read_upgrade(tmp_path / UPGRADE_FILE)
    assert broken.value.kind == ErrorKind.MANIFEST_INVALID
    assert "\n" not in broken.value.message


def test_an_error_before_any_lock_was_read_is_still_a_valid_document(tmp_path: Path) -> None:
    document = upgrade_document("error")
    document["reasons"] = [{"code": "lockfile", "message": "no uv.lock or requirements.txt"}]
    document["baseline"] = {"lock": "", "format": None, "sha256": None, "environment": None}
    document["candidate"] = {"lock": None, "format": None, "sha256": None,
                             "source": "computed", "upgrade": ["mathlib"], "environment": None}
    document["numerics"] = {"status": "not_compared",
                            "tolerance": {"atol": 1e-6, "rtol": 0.0,
                                          "per_artifact": [{"glob": "*.pt", "atol": 1e-3}]},
                            "comparison": None}
    document.update(changes=[], culprits=[], runs=[], fingerprint_diff=None, bisect_runs=0,
                    culprit_search={"status": "not_needed", "runs": 0, "max_runs": 32,
                                    "trials": []})
    assert read_upgrade(write_upgrade(document, tmp_path)) == document


def test_every_error_kind_is_a_reason_of_an_error_document() -> None:
    document = upgrade_document("error")
    for kind in ErrorKind:
        document["reasons"] = [{"code": kind.value, "message": "x"}]
        assert validation.errors("upgrade", document) == [], kind
    document["reasons"] = [{"code": "no_such_code", "message": "x"}]
    assert validation.errors("upgrade", document) == [
        "reasons[0].code: must be an error kind, numerics_changed, candidate_not_reproducible or"
        " baseline_not_reproducible"]


def test_a_run_entry_is_the_manifests_with_its_environment() -> None:
    """The run entries reference the manifest's run fields one by one (its entry is closed to
    extra fields): a field added there must be added here."""
    run = validation.load("manifest")["$defs"]["run"]
    entry = validation.load("upgrade")["$defs"]["run"]
    assert set(entry["properties"]) == set(run["properties"]) | {"environment", "packages"}
    assert set(entry["required"]) == set(run["required"]) | {"environment"}
    trial = upgrade_document()
    del trial["runs"][1]["packages"]
    assert validation.errors("upgrade", trial) == ["runs[1].packages: is required"]


def test_check_jsonschema_validates_a_written_document(tmp_path: Path) -> None:
    """A standard tool resolves every reference (into the manifest's and the environment diff's
    schemas) from the files alone, with no network."""
    path = write_upgrade(upgrade_document(), tmp_path)
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--schemafile", "schemas/upgrade.schema.json",
         str(path)],
        cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    broken = json.loads(path.read_text())
    broken["culprits"][0]["first_divergence"]["cause"] = "sunspots"
    path.write_text(json.dumps(broken))
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--schemafile", "schemas/upgrade.schema.json",
         str(path)],
        cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stdout + completed.stderr
