"""`repro-gate compare A B` on real run directories and manifests: sides, selection, ignored
fields, globs, exit codes and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.compare import compare, glob_matches, ignore_policy, load_side
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, ConfigError, ErrorKind, GateError
from repro_gate.probe import PROBE_SUBDIR, TRAJECTORY_FILE

STEPS = [{"step": 1, "loss": 1.0, "params": {"w": "aa"}},
         {"step": 2, "loss": 0.5, "params": {"w": "bb"}}]


def run_dir(root: Path, metrics: dict[str, Any], steps: list[dict[str, Any]] = STEPS,
            model: bytes = b"weights") -> Path:
    (root / PROBE_SUBDIR).mkdir(parents=True)
    (root / PROBE_SUBDIR / TRAJECTORY_FILE).write_text(
        "".join(json.dumps(step) + "\n" for step in steps))
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / "work").mkdir()
    (root / "work" / "model.bin").write_bytes(model)
    return root


def test_equal_run_directories_are_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {"loss": 0.5})
    b = run_dir(tmp_path / "b", {"loss": 0.5})

    assert compare(a, b) == EXIT_PASS

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "repro-gate compare: same"
    assert out[1] == "  2 deterministic runs are bitwise equal: 2 steps and 2 artifacts"


def test_a_file_named_with_a_newline_is_one_line_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {"loss": 0.5})
    b = run_dir(tmp_path / "b", {"loss": 0.5})
    forged = "x\n::notice title=repro-gate::PASS reproducible\n"
    (a / forged).write_text("1")
    (b / forged).write_text("2")

    assert compare(a, b) == EXIT_FAIL

    out = capsys.readouterr().out.splitlines()
    shown = "x\\n::notice title=repro-gate::PASS reproducible\\n"
    assert f"  {shown} differs between runs A and B" in out
    assert f"    {shown}: different" in out
    assert not any(line.lstrip().startswith("::") for line in out)


def test_a_differing_file_is_different_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {"loss": 0.5})
    b = run_dir(tmp_path / "b", {"loss": 0.5}, model=b"other weights")

    assert compare(a, b, as_json=True) == EXIT_FAIL

    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"] == "fail"
    assert printed["reasons"] == [{"code": "artifact_different",
                                   "message": "model.bin differs between runs A and B"}]
    assert printed["comparison"]["trajectory"]["status"] == "equal"


def test_a_divergent_trajectory_fails_at_its_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {})
    b = run_dir(tmp_path / "b", {}, steps=[STEPS[0], {**STEPS[1], "params": {"w": "cc"}}])

    assert compare(a, b, as_json=True) == EXIT_FAIL
    divergence = json.loads(capsys.readouterr().out)["comparison"]["first_divergence"]
    assert (divergence["step"], divergence["parameters"]) == (2, ["w"])


def test_only_the_selected_artifacts_are_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {"loss": 0.5})
    b = run_dir(tmp_path / "b", {"loss": 0.5}, model=b"other weights")

    assert compare(a, b, artifacts=["*.json"]) == EXIT_PASS
    assert "1 artifacts" in capsys.readouterr().out


def test_a_glob_matching_nothing_is_an_error_listing_the_artifacts(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", {})
    b = run_dir(tmp_path / "b", {})

    with pytest.raises(GateError) as raised:
        compare(a, b, artifacts=["*.pt"])

    assert raised.value.kind is ErrorKind.NO_ARTIFACTS
    assert raised.value.message == ("-a '*.pt' matches no artifact of run A or run B (their"
                                    " artifacts: metrics.json, model.bin)")


def test_ignored_fields_do_not_fail_the_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {"loss": 0.5, "finished_at": "10:00"})
    b = run_dir(tmp_path / "b", {"loss": 0.5, "finished_at": "10:05"})

    assert compare(a, b) == EXIT_FAIL
    assert "only `finished_at` differs in metrics.json" in capsys.readouterr().out
    assert compare(a, b, ignore=["metrics*.json:finished_at"]) == EXIT_PASS


def test_an_ignore_option_needs_a_glob_and_fields() -> None:
    policy = ignore_policy(["*.json:a, b.c"])

    assert [(rule.glob, list(rule.fields)) for rule in policy.ignore] == [
        ("*.json", ["a", "b.c"])]
    with pytest.raises(ConfigError, match=r"--ignore 'finished_at': must be GLOB:FIELD"):
        ignore_policy(["finished_at"])


def test_a_side_that_is_missing_or_holds_nothing_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    with pytest.raises(GateError) as missing:
        load_side(tmp_path / "absent", "A")
    with pytest.raises(GateError) as empty:
        load_side(tmp_path / "empty", "B")

    assert missing.value.kind is ErrorKind.INPUT_MISSING
    assert empty.value.kind is ErrorKind.INPUT_INVALID


def test_manifests_without_their_run_directories_compare_by_sha256(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = load_current()
    (tmp_path / "a.json").write_text(json.dumps(document))
    document["runs"][0]["artifacts"][1]["sha256"] = "f" * 64
    (tmp_path / "b.json").write_text(json.dumps(document))

    assert compare(tmp_path / "a.json", tmp_path / "a.json") == EXIT_PASS
    assert capsys.readouterr().out.startswith("repro-gate compare: same\n")
    assert compare(tmp_path / "a.json", tmp_path / "b.json", as_json=True) == EXIT_FAIL
    printed = json.loads(capsys.readouterr().out)
    assert [r["message"] for r in printed["reasons"]] == [
        "metrics.json differs between runs A and B"]


def test_glob_matching_follows_path_glob_from_the_root() -> None:
    assert glob_matches("*.pt", "model.pt")
    assert not glob_matches("*.pt", "checkpoints/model.pt")
    assert glob_matches("**/*.pt", "checkpoints/deep/model.pt")
    assert glob_matches("**/*.pt", "model.pt")
    assert glob_matches("./checkpoints/*.pt", "checkpoints/model.pt")
    assert not glob_matches("checkpoints", "checkpoints/model.pt")


def test_a_bad_tolerance_from_the_command_line_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run_dir(tmp_path / "a", {})

    assert main(["compare", str(a), str(a), "--tolerance", "loose"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("repro-gate: error: ")
    assert err.count("\n") == 1
