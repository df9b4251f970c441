"""`compare.ignore`: volatile fields of metric files (timestamps, host names) said once, skipped,
and listed as skipped; everything else still compared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.gate_cli import Result, check, compare, script
from helpers.paths import TRAININGS

IGNORE_CONFIG = """\
compare:
  ignore:
    - {glob: "metrics*.json", fields: [finished_at, host]}
    - {glob: "metrics.*", fields: ["runs.*.timestamp"]}
"""
YAML_IGNORE_CONFIG = """\
compare:
  ignore: [{glob: "*.yaml", fields: [finished_at, host, "**.timestamp"]}]
"""


def gate(workdir: Path, config: str | None, *training_args: str) -> Result:
    """A gate on `volatile_metrics.py` in a fresh copy of the trainings."""
    for training in TRAININGS.glob("*.py"):
        shutil.copy(training, workdir / training.name)
    if config is not None:
        (workdir / ".repro-gate.yml").write_text(config)
    return check(workdir, "--no-cost", *script("volatile_metrics.py"), *training_args)


def artifact(result: Result, path: str) -> dict:
    (item,) = [a for a in result.manifest["comparison"]["artifacts"] if a["path"] == path]
    return item


@pytest.fixture(scope="module")
def without_ignore(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return gate(tmp_path_factory.mktemp("without-ignore"), None)


def test_a_gate_failing_only_on_volatile_fields_says_so(without_ignore: Result) -> None:
    assert without_ignore.exit_code == 1, without_ignore.stdout + without_ignore.stderr
    (message,) = [r["message"] for r in without_ignore.manifest["reasons"]
                  if r["code"] == "artifact_different"]
    assert message.startswith("metrics.json differs between runs A and B; only `finished_at`")
    assert "`runs.train.timestamp`" in message and "`host`" not in message  # host is equal
    assert message.endswith(
        "differ in metrics.json: add them to `compare.ignore` if they are not results")
    assert artifact(without_ignore, "model.pt")["status"] == "equal"


def test_ignored_fields_are_skipped_and_listed_with_both_values(tmp_path: Path) -> None:
    result = gate(tmp_path, IGNORE_CONFIG)

    assert result.exit_code == 0, result.stdout + result.stderr
    metrics = artifact(result, "metrics.json")
    assert metrics["status"] == "equal"
    ignored = {entry["key"]: entry for entry in metrics["ignored"]}
    assert set(ignored) == {"finished_at", "host", "runs.train.timestamp", "runs.eval.timestamp"}
    finished = ignored["finished_at"]
    assert finished["differs"] and finished["a"] != finished["b"]
    assert isinstance(finished["a"], float) and isinstance(finished["b"], float)
    # The same host in both runs: skipped, but nothing to show.
    assert ignored["host"] == {"key": "host", "differs": False}
    # The wildcard took only the timestamps: the nested `epochs` beside them is still compared.
    assert "3 of 3 values equal; 4 fields ignored" in metrics["note"]
    assert "ignored (compare.ignore): finished_at (differs), host" in result.stdout
    assert result.manifest["config"]["compare"]["ignore"][1] == {
        "glob": "metrics.*", "fields": ["runs.*.timestamp"]}


def test_an_ignored_field_never_hides_a_real_difference(tmp_path: Path) -> None:
    result = gate(tmp_path, IGNORE_CONFIG, "noisy-loss")

    assert result.exit_code == 1, result.stdout + result.stderr
    metrics = artifact(result, "metrics.json")
    assert [key["key"] for key in metrics["keys"]] == ["loss"]
    assert len(metrics["ignored"]) == 4
    (message,) = [r["message"] for r in result.manifest["reasons"]]
    assert message == "metrics.json differs between runs A and B"  # no hint: loss is a result


def test_a_yaml_artifact_works_the_same(tmp_path: Path) -> None:
    result = gate(tmp_path, YAML_IGNORE_CONFIG, "yaml")

    assert result.exit_code == 0, result.stdout + result.stderr
    metrics = artifact(result, "metrics.yaml")
    assert (metrics["kind"], metrics["status"]) == ("yaml", "equal")
    assert {entry["key"] for entry in metrics["ignored"]} == {
        "finished_at", "host", "runs.train.timestamp", "runs.eval.timestamp"}


@pytest.mark.parametrize(("entry", "expected"), [
    ('{glob: "*.json", fields: ["runs..timestamp"]}', "compare.ignore[0].fields[0]"),
    ('{glob: "*.json"}', "compare.ignore[0]"),
    ('{glob: "*.json", fields: [finished_at], atol: 1}', "compare.ignore[0]"),
])
def test_a_bad_ignore_entry_is_a_one_line_error(
    tmp_path: Path, entry: str, expected: str
) -> None:
    result = gate(tmp_path, f"compare:\n  ignore: [{entry}]\n")

    assert result.exit_code == 2
    assert result.stderr.startswith("repro-gate: error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr and "Traceback" not in result.stderr


def test_compare_takes_the_same_fields_from_ignore_options(without_ignore: Result) -> None:
    runs = without_ignore.workdir / "repro-gate-out" / "runs"

    completed = compare(str(runs / "A"), str(runs / "B"), "--json",
                        "--ignore", "metrics.json:finished_at", "--ignore", "*.json:**.timestamp")

    assert completed.returncode == 0, completed.stdout + completed.stderr
    (metrics,) = [a for a in json.loads(completed.stdout)["comparison"]["artifacts"]
                  if a["path"] == "metrics.json"]
    assert {entry["key"] for entry in metrics["ignored"]} == {
        "finished_at", "runs.train.timestamp", "runs.eval.timestamp"}


@pytest.mark.parametrize("spec", ["metrics.json", "metrics.json:a..b", ":finished_at"])
def test_a_bad_ignore_option_is_a_one_line_error(without_ignore: Result, spec: str) -> None:
    runs = without_ignore.workdir / "repro-gate-out" / "runs"

    completed = compare(str(runs / "A"), str(runs / "B"), "--ignore", spec)

    assert completed.returncode == 2
    assert completed.stderr.startswith("repro-gate: error: --ignore")
    assert completed.stderr.count("\n") == 1


def test_one_volatile_key_gets_the_short_hint() -> None:
    from repro_gate.gate import verdict

    item = {"path": "metrics.json", "kind": "json", "status": "different", "runs": ["A", "B"],
            "keys": [{"key": "finished_at", "status": "different", "a": 1.0, "b": 2.0}]}
    comparison = {"basis": "bitwise", "first_divergence": None, "artifacts": [item]}

    (failure,) = verdict.failures(comparison, [])

    assert failure["message"] == (
        "metrics.json differs between runs A and B; only `finished_at` differs in metrics.json:"
        " add it to `compare.ignore` if it is not a result")
