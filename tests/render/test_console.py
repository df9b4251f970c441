"""The console report of `repro-gate check`, from a real-shaped manifest: the headline, what
was compared, the first divergence, the ops, the noise floor, the environment and checklist."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.cost_manifests import gate_manifest
from helpers.paths import MANIFEST_FAIL

from repro_gate.render import console


def fixture() -> dict[str, Any]:
    return copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))


def lines(manifest: dict[str, Any], path: str | None = None, detail: str = "") -> list[str]:
    return console.render(manifest, path, detail).splitlines()


def test_the_headline_and_the_reasons_come_first() -> None:
    manifest = fixture()
    assert lines(manifest)[:3] == [
        "repro-gate: FAIL: not reproducible",
        "  runs det-1 and det-2 diverge at step 3 (fc.weight, fc.bias)",
        "  2 of 3 artifacts differ between det-1 and det-2",
    ]


def test_each_artifact_says_what_differs_first() -> None:
    report = lines(fixture())
    start = report.index("    compared: 3 steps, 3 artifact comparisons (bitwise)")
    assert report[start + 1:start + 4] == [
        "      checkpoints/model.safetensors: different: 2 tensors differ, first fc.weight (1931"
        " elements, max abs diff 2.38e-07, max ULP 4)",
        "      metrics.json: different: 1 keys differ, first final_loss",
        "      vocab.txt: equal",
    ]
    assert "    first divergence: step 3 (det-1 vs det-2): fc.weight, fc.bias" in report


def test_names_from_the_training_show_their_control_characters_as_escapes() -> None:
    manifest = fixture()
    forged = "x\n::notice title=repro-gate::PASS reproducible\n"
    manifest["comparison"]["artifacts"][2]["path"] = forged
    manifest["comparison"]["artifacts"][0]["tensors"][0]["name"] = "fc.weight\r\x1b[2K"
    manifest["comparison"]["first_divergence"]["parameters"][1] = "fc\nbias"

    report = lines(manifest, detail="Traceback\x1b[31m")

    assert "      x\\n::notice title=repro-gate::PASS reproducible\\n: equal" in report
    assert "first fc.weight\\r\\x1b[2K (1931 elements" in "\n".join(report)
    assert "    first divergence: step 3 (det-1 vs det-2): fc.weight, fc\\nbias" in report
    assert "    | Traceback\\x1b[31m" in report
    assert not any(line.lstrip().startswith("::") for line in report)
    assert all(line.isprintable() for line in report)


def test_fields_left_out_by_compare_ignore_are_named_under_their_artifact() -> None:
    manifest = fixture()
    manifest["comparison"]["artifacts"][1]["ignored"] = [
        {"key": f"k{i}", "differs": i == 0} for i in range(6)]
    report = lines(manifest)
    at = report.index("      metrics.json: different: 1 keys differ, first final_loss")
    assert report[at + 1] == "        ignored (compare.ignore): k0 (differs), k1, k2, k3 and 2 more"


def test_a_multi_rank_divergence_names_its_rank() -> None:
    manifest = fixture()
    manifest["comparison"]["trajectory"]["ranks"] = 4
    manifest["comparison"]["first_divergence"].update(rank=2, loss_differs=True)
    report = lines(manifest)
    assert "    compared: 3 steps on each of 4 ranks, 3 artifact comparisons (bitwise)" in report
    assert ("    first divergence: rank 2, step 3 (det-1 vs det-2): fc.weight, fc.bias"
            " (loss differs too)") in report


def test_ops_without_a_location_and_no_ops_at_all() -> None:
    manifest = fixture()
    manifest["nondeterministic_ops"][1]["file"] = None
    report = lines(manifest)
    assert ("    scaled_dot_product_attention at (location unknown) (1x,"
            " nondeterministic_default)") in report
    manifest["nondeterministic_ops"] = []
    assert "  nondeterministic ops: none seen" in lines(manifest)


def test_the_noise_floor_says_whether_default_mode_diverged() -> None:
    manifest = fixture()
    manifest["noise_floor"] = {"steps_compared": 40, "first_divergent_step": None}
    assert "  noise floor: the 40 steps of two default-mode runs were identical" in lines(manifest)
    manifest["noise_floor"] = {"steps_compared": 40, "first_divergent_step": 2}
    assert ("  noise floor: default-mode runs diverge at step 2 (the nondeterminism that"
            " determinism removes)") in lines(manifest)


def test_an_unchanged_environment_and_a_passing_checklist_are_one_line_each() -> None:
    manifest = fixture()
    manifest["environment_diff"]["changes"] = []
    for item in manifest["checklist"]["items"]:
        item["status"] = "pass"
    report = lines(manifest)
    assert "  environment vs baseline: no change" in report
    assert "  checklist: all 3 items pass" in report
    assert not any(line.startswith("    fail:") for line in report)


def test_failing_checklist_items_come_before_warnings() -> None:
    manifest = fixture()
    manifest["checklist"]["items"].reverse()  # the warning first in the manifest
    report = lines(manifest)
    at = report.index("  checklist: 1 fail, 1 warn (fixes below; `repro-gate doctor`)")
    assert report[at + 1].startswith("    fail: Deterministic algorithms: ")
    assert report[at + 2].startswith("    warn: TF32 off: ")


def test_each_comparison_is_said_once_under_its_heading() -> None:
    report = lines(fixture())
    compared = [line for line in report if line.lstrip().startswith("compared: ")]
    assert compared == ["    compared: 3 steps, 3 artifact comparisons (bitwise)"]
    assert report[report.index(compared[0]) - 1] == "  runs A and B:"
    assert sum(line.lstrip().startswith("first divergence: ") for line in report) == 1


def test_risks_are_counted_and_listed_after_warnings() -> None:
    manifest = fixture()
    manifest["checklist"]["items"][1]["status"] = "risk"
    report = lines(manifest)
    at = report.index("  checklist: 0 fail, 1 warn, 1 risk (fixes below; `repro-gate doctor`)")
    assert report[at + 1].startswith("    warn: TF32 off: ")
    assert report[at + 2].startswith("    risk: Deterministic algorithms: ")


def test_an_error_shows_the_last_lines_of_the_log() -> None:
    manifest = fixture()
    manifest["verdict"] = "error"
    manifest["reasons"] = [{"code": "run_failed", "message": "det-2 exited with code 86"}]
    report = lines(manifest, None, "Traceback (most recent call last):\nKeyError: 'lr'")
    assert report[0] == "repro-gate: ERROR: the gate could not decide"
    at = report.index("  last lines of the run's log:")
    assert report[at + 1:at + 3] == [
        "    | Traceback (most recent call last):", "    | KeyError: 'lr'"]


def test_a_verdict_from_artifacts_only_says_so_in_the_headline() -> None:
    manifest = fixture()
    manifest["evidence"] = {"probe_loaded": False, "steps_observed": False}
    assert lines(manifest)[0] == ("repro-gate: FAIL: not reproducible, from artifacts only: no"
                                  " steps observed, determinism not applied")


def test_the_manifest_path_comes_before_the_lines_that_reproduce_the_run() -> None:
    report = lines(fixture(), "out/manifest.json")
    at = report.index("  manifest: out/manifest.json")
    assert report[at + 1] == "  to reproduce outside the gate:"
    assert report[-1] == "    torch.manual_seed(1234)"
    assert not any(line.startswith("  manifest:") for line in lines(fixture()))


def test_a_reproducible_run_whose_numerics_changed_says_both() -> None:
    manifest = gate_manifest(None, reproducible=True)
    manifest["comparison"]["golden"] = {
        "status": "changed", "path": "golden/a10g.json", "machine_class": "a10g",
        "golden_machine_class": "a10g", "bless_command": "repro-gate golden bless",
        "candidate": "out/golden/a10g.json"}
    line = "numerics changed against `golden/a10g.json`"
    manifest["verdict"] = "fail"
    manifest["reasons"].insert(0, {"code": "numerics_changed", "message": "golden: changed"})
    report = lines(manifest)
    assert report[0] == "repro-gate: FAIL: reproducible, but the numerics changed"
    # Under its own heading: the artifact lines of runs A and B are not read as the golden's.
    at = report.index("  against the golden file:")
    assert report[at + 1:at + 3] == [
        f"    {line}", "    this run's golden file: out/golden/a10g.json"]
    manifest["reasons"][0]["message"] = line  # said among the reasons: not said twice
    assert [entry.strip() for entry in lines(manifest)].count(line) == 1
