"""The manifest's fingerprint, checklist, config_hash and environment_diff, built together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro_gate.config import Config
from repro_gate.errors import GateError
from repro_gate.fingerprint.identity import config_hash
from repro_gate.fingerprint.sections import manifest_sections

CONFIG = Config(workdir=Path("/w"), output_dir=Path("/w/out"))


def host(commit: str) -> dict[str, Any]:
    return {"code": {"commit": commit, "dirty": False}, "cpu": {"model": "EPYC", "count": 8},
            "gpus": {"devices": [], "reason": "no NVML"}}


def runtime() -> dict[str, Any]:
    return {"python": {"version": "3.11.7"}, "torch": {"version": "2.4.0"},
            "flags": {"deterministic_algorithms": True, "cudnn_benchmark": False}}


def test_without_a_baseline_the_sections_hold_no_environment_diff() -> None:
    sections = manifest_sections(CONFIG, host("a" * 40), {"A": runtime(), "B": runtime()},
                                 None, None)

    assert set(sections) == {"fingerprint", "checklist", "config_hash"}
    assert sections["config_hash"] == config_hash(sections["fingerprint"])
    items = {item["id"]: item["status"] for item in sections["checklist"]["items"]}
    assert items["deterministic_algorithms"] == "pass"
    assert items["clean_tree"] == "pass"


def test_a_baseline_fingerprint_document_is_diffed_against_this_run(tmp_path: Path) -> None:
    earlier = manifest_sections(CONFIG, host("a" * 40), {"A": runtime()}, None, None)
    baseline = tmp_path / "fingerprint.json"
    baseline.write_text(json.dumps({"fingerprint": earlier["fingerprint"]}), encoding="utf-8")

    sections = manifest_sections(CONFIG, host("b" * 40), {"A": runtime()}, None, baseline)

    diff = sections["environment_diff"]
    assert diff["old_config_hash"] == earlier["config_hash"]
    assert diff["new_config_hash"] == sections["config_hash"]
    assert [change["message"] for change in diff["changes"]] == [
        f"commit {'a' * 12} -> {'b' * 12}"]


@pytest.mark.parametrize(
    ("content", "kind", "message"),
    [
        (None, "baseline", "file not found"),
        ('{"neither": 1}', "baseline", "neither a repro-gate manifest nor a fingerprint"),
        ('{"schema_version": 99}', "manifest_version", "newer than this repro-gate"),
    ],
)
def test_a_bad_baseline_is_a_one_line_error(tmp_path: Path, content: str | None, kind: str,
                                            message: str) -> None:
    baseline = tmp_path / "baseline.json"
    if content is not None:
        baseline.write_text(content, encoding="utf-8")

    with pytest.raises(GateError) as raised:
        manifest_sections(CONFIG, host("a" * 40), {"A": runtime()}, None, baseline)

    assert raised.value.kind == kind
    assert message in raised.value.message and "\n" not in raised.value.message
