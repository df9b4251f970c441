"""Reading manifests of every version: earlier ones migrated, newer ones refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import MANIFEST_V3, V1_UNWRITTEN, as_v1, as_v2, as_v3, as_v4, write_json

import repro_gate
from repro_gate import manifest, validation
from repro_gate.errors import GateError


def test_a_v1_manifest_reads_as_the_same_v2_manifest(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v1 = as_v1(manifest_current)
    assert validation.errors("manifest", v1) != []  # not a valid current manifest as it is
    v2 = {key: value for key, value in as_v2(manifest_current).items()
          if key not in V1_UNWRITTEN}

    read_v1 = manifest.read(write_json(tmp_path / "v1.json", v1))
    read_v2 = manifest.read(write_json(tmp_path / "v2.json", v2))

    assert read_v1 == read_v2
    assert read_v1["schema_version"] == manifest.SCHEMA_VERSION == 5
    assert read_v1["runs"] == manifest_current["runs"]


def test_a_v2_cost_reads_as_inconclusive_keeping_its_figure(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v2 = as_v2(manifest_current)
    read = manifest.read(write_json(tmp_path / "v2.json", v2))
    assert validation.errors("manifest", read) == []
    assert read["cost"] == {
        "status": "inconclusive",
        "reason": "measured across separate processes by an earlier version",
        "pct": 7.4, "ci95_pct": None, "basis": "runs",
        "det_step_seconds": 0.1523, "default_step_seconds": 0.1418,
        "design": None, "max_width_pct": None,
        "note": "migrated from schema version 2 (step_median basis)",
    }
    assert read["fingerprint"]["random"]["seeding"]["note"].startswith("recorded before schema")
    read["fingerprint"]["random"]["seeding"] = manifest_current["fingerprint"]["random"]["seeding"]
    assert {key: value for key, value in read.items() if key != "cost"} == {
        key: value for key, value in manifest_current.items() if key != "cost"}
    no_cost = manifest.read(write_json(tmp_path / "none.json", {**v2, "cost": None}))
    assert no_cost["cost"] is None


def test_a_v3_manifest_reads_as_seeded_by_the_gate_with_nothing_recorded_of_the_training(
    tmp_path: Path,
) -> None:
    """A version 3 gate seeded every deterministic run itself: the migrated record says so."""
    path = tmp_path / "manifest.json"
    path.write_bytes(MANIFEST_V3.read_bytes())  # as a version 3 gate wrote it
    read = manifest.read(path)
    assert validation.errors("manifest", read) == []
    assert read["schema_version"] == 5
    random = read["fingerprint"]["random"]
    assert random["seeding"] == {
        "gate_seed": 1234, "training": [], "first_parameter": None,
        "parameters_before_seeding": None, "unseeded": [], "settings": [],
        "note": "recorded before schema version 4 by a gate that seeded every deterministic run"
                " itself; what the training seeded was not recorded"}
    v3 = json.loads(MANIFEST_V3.read_text(encoding="utf-8"))
    assert {k: v for k, v in random.items() if k != "seeding"} == v3["fingerprint"]["random"]
    assert read["comparison"] == {**v3["comparison"], "golden": None, "resume": None}
    assert {k: v for k, v in read.items()
            if k not in ("fingerprint", "schema_version", "comparison")} == {
        k: v for k, v in v3.items() if k not in ("fingerprint", "schema_version", "comparison")}


def test_a_v3_document_without_a_fingerprint_reads_too(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v3 = as_v3(manifest_current)
    del v3["fingerprint"], v3["checklist"], v3["config_hash"]
    read = manifest.read(write_json(tmp_path / "manifest.json", v3))
    assert validation.errors("manifest", read) == []
    assert "fingerprint" not in read


def test_a_v1_reserved_section_is_dropped_not_misread(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v1 = as_v1(manifest_current)
    v1["metrics"] = {"anything": "v1 gave this section no shape"}
    read = manifest.read(write_json(tmp_path / "manifest.json", v1))
    assert "metrics" not in read
    assert validation.errors("manifest", read) == []


def test_a_v1_manifest_is_written_back_as_the_current_version(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    path = write_json(tmp_path / "manifest.json", as_v1(manifest_current))
    document = manifest.read(path)
    manifest.update(path, document)
    assert json.loads(path.read_text(encoding="utf-8"))["schema_version"] == 5


def test_a_newer_version_is_refused_in_one_line(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    path = write_json(tmp_path / "manifest.json", {**manifest_current, "schema_version": 99})
    with pytest.raises(GateError) as raised:
        manifest.read(path)
    assert raised.value.kind == "manifest_version"
    assert raised.value.message == (
        f"{path}: schema_version 99 is newer than this repro-gate understands (5.1);"
        " upgrade repro-gate")


def test_a_newer_minor_is_refused_and_an_older_one_read_as_it_is(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    # An additive change bumps schema_minor: an older minor, or none, is valid as it is.
    newer = write_json(tmp_path / "newer.json", {**manifest_current, "schema_minor": 2})
    with pytest.raises(GateError) as raised:
        manifest.read(newer)
    assert raised.value.message == (
        f"{newer}: schema_version 5.2 is newer than this repro-gate understands (5.1);"
        " upgrade repro-gate")
    older = {key: value for key, value in manifest_current.items() if key != "schema_minor"}
    assert manifest.read(write_json(tmp_path / "older.json", older))["verdict"] == (
        manifest_current["verdict"])


@pytest.mark.parametrize(
    ("version", "found"),
    [(None, "no schema_version"), ("2", "schema_version '2'"), (True, "schema_version True"),
     (0, "schema_version 0"), (1.5, "schema_version 1.5")],
)
def test_without_an_integer_version_it_is_not_a_manifest(
    tmp_path: Path, manifest_current: dict[str, Any], version: object, found: str
) -> None:
    manifest_current.pop("schema_version")
    if version is not None:
        manifest_current["schema_version"] = version
    path = write_json(tmp_path / "manifest.json", manifest_current)
    with pytest.raises(GateError) as raised:
        manifest.read(path)
    assert raised.value.kind == "manifest_invalid"
    assert raised.value.message == f"{path}: not a repro-gate manifest ({found})"


def test_a_baseline_goes_through_the_same_versions(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    newer = write_json(tmp_path / "newer.json", {**manifest_current, "schema_version": 6})
    with pytest.raises(GateError) as raised:
        manifest.read_document(newer, kind="baseline")
    assert raised.value.kind == "manifest_version"

    older = write_json(tmp_path / "older.json", as_v1(manifest_current))
    with pytest.raises(GateError) as raised:
        manifest.read_document(older, kind="baseline")
    assert (raised.value.kind, raised.value.message) == (
        "baseline", f"{older}: manifest (schema_version 1) has no fingerprint")

    current = write_json(tmp_path / "current.json", manifest_current)
    assert manifest.read_document(current, kind="baseline") == manifest_current


def test_a_baseline_manifest_is_validated(tmp_path: Path, manifest_current: dict[str, Any]) -> None:
    del manifest_current["runs"]
    path = write_json(tmp_path / "baseline.json", manifest_current)
    with pytest.raises(GateError) as raised:
        manifest.read_document(path, kind="baseline")
    assert raised.value.kind == "baseline"
    assert raised.value.message.startswith(f"{path}: not a valid manifest: ")
    assert "runs" in raised.value.message


def test_the_header_starts_a_valid_manifest(manifest_current: dict[str, Any]) -> None:
    header = manifest.header("nightly", "2026-11-20T09:12:03+00:00")
    assert header == {
        "schema_version": 5,
        "schema_minor": 1,
        "tool": {"name": "repro-gate", "version": repro_gate.__version__},
        "gate": "nightly",
        "started_at": "2026-11-20T09:12:03+00:00",
        "finished_at": "2026-11-20T09:12:03+00:00",
    }
    finished = manifest.header("nightly", "2026-11-20T09:12:03+00:00", "2026-11-20T09:19:41Z")
    assert finished["finished_at"] == "2026-11-20T09:19:41Z"
    assert validation.errors("manifest", {**manifest_current, **finished}) == []


def test_a_v4_manifest_reads_as_a_gate_without_golden_or_resume_check(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    """A version 4 gate compared with no golden trajectory and ran no resume check."""
    v4 = as_v4(manifest_current)
    assert "resume" not in v4["comparison"] and "golden" not in v4["comparison"]
    read = manifest.read(write_json(tmp_path / "manifest.json", v4))
    assert validation.errors("manifest", read) == []
    assert read["schema_version"] == 5
    assert read["comparison"]["resume"] is None
    assert read["comparison"]["golden"] is None
    assert read == {**manifest_current, "schema_version": 5,
                    "comparison": {**manifest_current["comparison"], "golden": None,
                                   "resume": None}}
