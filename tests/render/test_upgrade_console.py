"""The pieces of the `repro-gate upgrade` console report: versions, tolerances, the culprit
groups and search, the candidate's reproducibility and cost, and control characters escaped."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.render import upgrade_console as uc

SEARCH = {"status": "found", "runs": 5, "max_runs": 32, "trials": []}


def culprit(name: str, group: int, step: int = 3, **fields: Any) -> dict[str, Any]:
    entry = {"name": name, "old": "1.0", "new": "2.0", "kind": "upgraded", "group": group,
             "first_divergence": {"step": step, "parameters": ["fc.weight"], "cause": "optimizer",
                                  "runs": ["baseline-A", "trial-1"]},
             "max_abs_diff": 0.5, "max_rel_diff": None, "max_ulp_diff": 7,
             "artifact": "model.pt: fc.weight"}
    entry.update(fields)
    return entry


def change(name: str, direct: bool = True, kind: str = "upgraded",
           applies: bool = True) -> dict[str, Any]:
    return {"name": name, "old": "1.0", "new": "2.0", "kind": kind, "direct": direct,
            "applies": applies}


def test_versions_in_words() -> None:
    assert uc.versions_text("1.26.4", "2.0.0") == "1.26.4 -> 2.0.0"
    assert uc.versions_text(None, "2.0.0") == "(added, 2.0.0)"
    assert uc.versions_text("1.26.4", None) == "1.26.4 (removed)"
    assert uc.change_text("numpy", None, "2.0.0") == "numpy (added, 2.0.0)"
    assert uc.plural(1, "run") == "1 run" and uc.plural(0, "run") == "0 runs"


def test_tolerances_in_words() -> None:
    assert uc.tolerance_text("bitwise") == "bitwise"
    assert uc.tolerance_text({"atol": 1e-6, "rtol": 0.0}) == "atol 1e-06, rtol 0"
    two = {"atol": 0.0, "rtol": 1e-5, "per_artifact": [{"glob": "*.pt"}, {"glob": "*.bin"}]}
    assert uc.tolerance_text(two) == "atol 0, rtol 1e-05, 2 per-artifact overrides"
    assert uc.numerics_text({"status": "not_compared", "tolerance": "bitwise"}) == "not compared"
    assert uc.numerics_text({"status": "changed", "tolerance": "bitwise"}) == "changed (bitwise)"


def test_what_was_compared_and_how_it_was_kept() -> None:
    compared = {"status": "same", "tolerance": "bitwise", "comparison": {
        "trajectory": {"steps_compared": 1}, "artifacts": [{"path": "a"}, {"path": "b"}]}}
    assert uc.compared_text(compared) == "1 step and 2 artifacts compared"
    assert uc.kept_how(compared) == "bit for bit"
    assert uc.kept_how({**compared, "status": "within_tolerance"}) == "within tolerance"
    empty = {"status": "same", "tolerance": "bitwise",
             "comparison": {"trajectory": {"steps_compared": 0}, "artifacts": []}}
    assert uc.compared_text(empty) is None
    assert uc.kept_how(empty) == "not compared"


def test_culprits_are_grouped_by_their_index_and_counted() -> None:
    document = {"culprits": [culprit("b", 1), culprit("a", 0), culprit("c", 1)],
                "changes": [change("a"), change("b"), change("c"), change("d")],
                "culprit_search": SEARCH}
    groups = uc.groups(document)
    assert [[m.name for m in g.members] for g in groups] == [["a"], ["b", "c"]]
    assert uc.members_text(groups[1]) == "b 1.0 -> 2.0 + c 1.0 -> 2.0"
    assert uc.culprits_words(document) == (
        "3 of 4 upgraded packages are responsible, in 2 independent groups")


def test_a_change_set_with_an_addition_counts_changed_packages() -> None:
    document = {"culprits": [culprit("a", 0)],
                "changes": [change("a"), change("new", kind="added"),
                            change("winonly", applies=False)],
                "culprit_search": SEARCH}
    assert uc.culprits_words(document) == "1 of 2 changed packages is responsible"


@pytest.mark.parametrize(("status", "why"), [
    ("incomplete", "no package named: the culprit search reached its bound"),
    ("not_found", "no package named: the culprit search found no subset that does it"),
])
def test_no_culprit_says_why(status: str, why: str) -> None:
    document = {"culprits": [], "changes": [change("a")],
                "culprit_search": {**SEARCH, "status": status}}
    assert uc.culprits_words(document) == why


def test_the_evidence_of_a_group() -> None:
    group = uc.groups({"culprits": [culprit("a", 0)]})[0]
    assert uc.divergence_text(group.divergence) == "step 3, parameters fc.weight"
    assert uc.divergence_text(None) == "none: the trajectories agree, only artifacts differ"
    assert uc.cause_text(group.divergence) == "optimizer update diverges at step 3"
    assert uc.difference_text(group) == "max abs 0.5, max ULP 7 (in model.pt: fc.weight)"
    bare = uc.groups({"culprits": [culprit("a", 0, max_abs_diff=None, max_ulp_diff=None)]})[0]
    assert uc.difference_text(bare) == ""


def test_the_search_and_the_candidates_gate_in_words() -> None:
    assert uc.search_text({"culprit_search": SEARCH}) == "5 runs (max 32), found"
    noted = {**SEARCH, "status": "incomplete", "note": "max_bisect_runs reached"}
    assert uc.search_text({"culprit_search": noted}) == (
        "5 runs (max 32), incomplete: its bound was reached before it could decide:"
        " max_bisect_runs reached")
    assert uc.reproducibility_text(None).startswith("not checked")
    failed = {"verdict": "fail", "reasons": [{"message": "  runs\ndiverge "}]}
    assert uc.reproducibility_text(failed) == "not reproducible: runs diverge"
    assert uc.reproducibility_text({"verdict": "error", "reasons": []}) == "gate error"


def test_the_first_message_skips_blank_and_odd_reasons() -> None:
    assert uc.first_message([{"message": " "}, "text", {"message": "the lock\n fails"}]) == (
        "the lock fails")
    assert uc.first_message(None) == ""


def test_the_cost_pair_shows_a_figure_only_when_measured() -> None:
    measured = {"status": "measured", "pct": 3.1, "ci95_pct": [2.1, 4.1]}
    inconclusive = {"status": "inconclusive", "pct": 9.9, "ci95_pct": None}
    pair = {"reproducibility": {"baseline": {"cost": measured},
                                "candidate": {"cost": inconclusive}}}
    assert uc.cost_pair(pair) == (
        "baseline +3.1% (95% interval +2.1% to +4.1%) -> candidate inconclusive")
    assert uc.cost_pair({"reproducibility": {"baseline": None, "candidate": None}}) == (
        "not measured")


def test_an_error_lists_its_reasons_and_what_was_kept_with_control_characters_escaped() -> None:
    document = {
        "verdict": "error",
        "reasons": [{"code": "lock_unresolvable", "message": "no version of\nevil\x1b[31m"}],
        "reproducibility": {"baseline": {"manifest": "out/baseline/manifest.json"},
                            "candidate": None},
        "candidate": {"lock": "out/candidate.uv.lock"},
    }
    assert uc.render(document, "out/upgrade.json").splitlines() == [
        "repro-gate upgrade: ERROR: the upgrade check could not decide",
        "  lock_unresolvable: no version of evil\\x1b[31m",
        "  kept: baseline manifest out/baseline/manifest.json",
        "  kept: candidate lock out/candidate.uv.lock",
        "  report: out/upgrade.json",
    ]
