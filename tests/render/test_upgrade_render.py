"""The report of `repro-gate upgrade`, on the console and in Markdown, for each verdict.

Each document is built here as the upgrade check would write it and validated against
schemas/upgrade.schema.json before anything is rendered from it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from markdown_it import MarkdownIt

from repro_gate import validation
from repro_gate.render import markdown_upgrade, upgrade_console
from repro_gate.render.markdown import CHECK_TEXT_LIMIT

SHA = "ab" * 32
PARAMETERS = ["fc.weight", "fc.bias", "head.weight", "head.bias", "norm.weight"]
SHOWN = "repro-gate-out/upgrade.json"
COMPARED = {"basis": "bitwise", "first_divergence": None,
            "trajectory": {"steps_compared": 8, "status": "equal"},
            "artifacts": [{"path": "model.pt", "kind": "torch", "status": "equal"}]}


def change(name: str, old: str | None, new: str | None, direct: bool = True,
           kind: str = "upgraded") -> dict[str, Any]:
    return {"name": name, "old": old, "new": new, "kind": kind, "direct": direct,
            "applies": True}


def summary(verdict: str = "pass", pct: float | None = 3.1, reasons: list[Any] | None = None,
            manifest: str | None = "repro-gate-out/upgrade/candidate/manifest.json"
            ) -> dict[str, Any]:
    cost = ({"status": "measured", "pct": pct, "ci95_pct": [pct - 1, pct + 1]} if pct is not None
            else {"status": "inconclusive", "pct": None, "ci95_pct": None})
    return {"verdict": verdict, "manifest": manifest, "reasons": reasons or [], "cost": cost}


def divergence(cause: str = "forward", step: int = 3) -> dict[str, Any]:
    found: dict[str, Any] = {"step": step, "parameters": PARAMETERS, "loss_differs": True,
                             "runs": ["baseline-A", "trial-5"], "cause": cause}
    if cause == "forward":
        found["module"] = "body.1"
    if cause == "backward":
        found["gradients"] = ["fc.weight"]
    return found


def culprit(name: str, old: str, new: str, group: int = 0, cause: str = "forward"
            ) -> dict[str, Any]:
    return {"name": name, "old": old, "new": new, "kind": "upgraded", "group": group,
            "first_divergence": divergence(cause), "max_abs_diff": 0.0015,
            "max_rel_diff": 0.0002, "max_ulp_diff": 40, "artifact": "model.pt: fc.weight"}


def run(name: str, environment: str, packages: list[str] | None = None) -> dict[str, Any]:
    entry = {"name": name, "mode": "deterministic", "exit_code": 0, "wall_seconds": 1.5,
             "steps": 8, "log_path": f"logs/{name}.log", "run_dir": f"runs/{name}",
             "artifacts": [], "timed_out": False, "stopped": None, "launcher": "local",
             "environment": environment}
    return entry if packages is None else {**entry, "packages": packages}


def document(verdict: str = "same", **fields: Any) -> dict[str, Any]:
    """A valid upgrade.json: three upgraded packages (two direct), both gates passing;
    `fields` replace top-level fields."""
    built = {
        "schema_version": 1,
        "tool": {"name": "repro-gate", "version": "0.9.0"},
        "gate": "train",
        "started_at": "2026-11-23T10:00:00+00:00",
        "finished_at": "2026-11-23T10:05:00+00:00",
        "verdict": verdict,
        "reasons": [],
        "output_dir": "repro-gate-out",
        "baseline": {"lock": "uv.lock", "format": "uv.lock", "sha256": SHA,
                     "environment": {"path": "/cache/envs/a", "lock_sha256": SHA,
                                     "reused": True, "installed": 0}},
        "candidate": {"lock": "repro-gate-out/upgrade/candidate.uv.lock", "format": "uv.lock",
                      "sha256": SHA, "source": "computed", "upgrade": [],
                      "environment": {"path": "/cache/envs/b", "lock_sha256": SHA,
                                      "reused": False, "installed": 3}},
        "changes": [change("helperlib", "2.0", "2.1"), change("mathlib", "1.0.0", "1.1.0"),
                    change("tinydep", "0.1", "0.2", direct=False)],
        "numerics": {"status": "same", "tolerance": "bitwise", "comparison": COMPARED},
        "reproducibility": {"baseline": summary(manifest="repro-gate-out/upgrade/baseline/"
                                                         "manifest.json"),
                            "candidate": summary(pct=4.0), "new_nondeterministic_ops": []},
        "culprits": [],
        "culprit_search": {"status": "not_needed", "runs": 0, "max_runs": 32, "trials": []},
        "bisect_runs": 0,
        "fingerprint_diff": None,
        "runs": [run("baseline-A", "baseline"), run("candidate-A", "candidate")],
    }
    built.update(fields)
    assert validation.errors("upgrade", built) == []
    return built


def changed(culprits: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    trials = [{"packages": ["helperlib"], "outcome": "same", "step": None},
              {"packages": ["mathlib"], "outcome": "changed", "step": 3}]
    defaults: dict[str, Any] = {
        "reasons": [{"code": "numerics_changed", "message": "the numerics changed at step 3"}],
        "numerics": {"status": "changed", "tolerance": {"atol": 1e-6, "rtol": 1e-5},
                     "comparison": None},
        "culprits": culprits,
        "culprit_search": {"status": "found", "runs": 5, "max_runs": 32, "trials": trials},
        "bisect_runs": 5,
    }
    return document("changed", **{**defaults, **fields})


def lines(text: str) -> list[str]:
    return text.splitlines()


def html(source: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(source)


def test_same_says_numerics_kept_and_reproducible() -> None:
    same = document()
    text = upgrade_console.render(same, SHOWN)
    assert lines(text)[0] == ("repro-gate upgrade: SAME: the upgrade keeps the numerics bit for"
                              " bit (8 steps and 1 artifact compared) and the training"
                              " reproducible")
    assert "  numerics (baseline run A vs candidate run A): same (bitwise)" in lines(text)
    assert "  candidate: reproducible (its own gate passes)" in lines(text)
    assert ("  cost of determinism: baseline +3.1% (95% interval +2.1% to +4.1%) -> candidate"
            " +4.0% (95% interval +3.0% to +5.0%)") in lines(text)
    assert "  culprit search: 0 runs (max 32), not needed" in lines(text)
    assert lines(text)[-1] == f"  report: {SHOWN}"
    assert not any("culprit:" in line for line in lines(text))
    assert markdown_upgrade.title(same) == "numerics kept · bit for bit, reproducible"
    assert html(markdown_upgrade.report(same)).startswith(
        "<h3>✅ train upgrade: numerics kept · bit for bit, reproducible</h3>")


def test_same_within_tolerance_says_so() -> None:
    tolerant = document(numerics={"status": "within_tolerance", "comparison": COMPARED,
                                  "tolerance": {"atol": 1e-6, "rtol": 0.0,
                                                "per_artifact": [{"glob": "*.pt", "atol": 0.1}]}})
    text = upgrade_console.render(tolerant, SHOWN)
    assert lines(text)[0].endswith("keeps the numerics within tolerance (8 steps and 1 artifact"
                                   " compared) and the training reproducible")
    assert lines(text)[1].endswith(
        "within tolerance (atol 1e-06, rtol 0, 1 per-artifact override)")
    assert markdown_upgrade.title(tolerant) == "numerics kept · within tolerance, reproducible"


def test_same_never_claims_bit_for_bit_when_nothing_was_compared() -> None:
    nothing = {"status": "not_compared", "tolerance": "bitwise", "comparison": None}
    for changes, why in (([], "the two locks pin the same versions"),
                         ([{**change("winonly", "1.0", "1.1"), "applies": False}],
                          "no change applies on this interpreter, so nothing ran")):
        same = document(numerics=nothing, changes=changes,
                        reproducibility={"baseline": None, "candidate": None,
                                         "new_nondeterministic_ops": []}, runs=[])
        text = upgrade_console.render(same, SHOWN)
        assert lines(text)[0] == f"repro-gate upgrade: SAME: nothing was compared: {why}"
        assert "bit for bit" not in text
        assert markdown_upgrade.title(same) == f"nothing compared · {why}"
        assert "bit for bit" not in markdown_upgrade.report(same)


def test_changed_names_the_culprit_its_step_parameters_and_cause() -> None:
    one = changed([culprit("mathlib", "1.0.0", "1.1.0")])
    text = upgrade_console.render(one, SHOWN)
    assert lines(text)[0] == ("repro-gate upgrade: CHANGED: numerics changed: 1 of 3 upgraded"
                              " packages is responsible")
    assert lines(text)[1:6] == [
        "  numerics (baseline run A vs candidate run A): changed (atol 1e-06, rtol 1e-05)",
        "  culprit: mathlib 1.0.0 -> 1.1.0",
        "    first divergence: step 3, parameters fc.weight, fc.bias, head.weight and 2 more",
        "    cause: forward pass diverges at step 3 (module body.1)",
        "    largest artifact difference: max abs 0.0015, max rel 0.0002, max ULP 40"
        " (in model.pt: fc.weight)",
    ]
    # the change set, direct changes first
    assert lines(text)[6:10] == [
        "  changes: 3 packages (2 direct, 1 transitive)",
        "    helperlib 2.0 -> 2.1 (upgraded, direct)",
        "    mathlib 1.0.0 -> 1.1.0 (upgraded, direct)",
        "    tinydep 0.1 -> 0.2 (upgraded, transitive)",
    ]
    assert "  culprit search: 5 runs (max 32), found" in lines(text)
    assert markdown_upgrade.title(one) == "numerics changed · mathlib 1.0.0 -> 1.1.0 (step 3)"
    rendered = html(markdown_upgrade.report(one))
    table = rendered[rendered.index("<table>"):rendered.index("</table>")]
    assert "<code>mathlib</code> 1.0.0 -&gt; 1.1.0" in table
    assert "forward pass diverges at step 3 (module body.1)" in table
    assert "step 3, parameters fc.weight, fc.bias, head.weight and 2 more" in table


def test_an_interacting_pair_is_named_as_acting_only_together() -> None:
    pair = changed([culprit("helperlib", "2.0", "2.1", cause="backward"),
                    culprit("mathlib", "1.0.0", "1.1.0", cause="backward")])
    text = upgrade_console.render(pair, SHOWN)
    assert lines(text)[0].endswith("numerics changed: 2 of 3 upgraded packages are responsible"
                                   " together")
    assert "  culprits (only together): helperlib 2.0 -> 2.1 + mathlib 1.0.0 -> 1.1.0" in text
    assert "    cause: backward pass diverges at step 3 (gradients of fc.weight)" in text
    assert markdown_upgrade.title(pair) == (
        "numerics changed · helperlib 2.0 -> 2.1 + mathlib 1.0.0 -> 1.1.0 (step 3)")
    assert "(only together)" in markdown_upgrade.report(pair)


def test_independent_culprits_each_get_their_evidence() -> None:
    two = changed([culprit("helperlib", "2.0", "2.1", group=0),
                   culprit("mathlib", "1.0.0", "1.1.0", group=1, cause="optimizer")])
    text = upgrade_console.render(two, SHOWN)
    assert lines(text)[0].endswith("2 of 3 upgraded packages are responsible, in 2 independent"
                                   " groups")
    assert "  culprit: helperlib 2.0 -> 2.1" in lines(text)
    assert "  culprit: mathlib 1.0.0 -> 1.1.0" in lines(text)
    assert "    cause: optimizer update diverges at step 3" in lines(text)
    assert markdown_upgrade.title(two).endswith("(step 3) +1 more")


def test_not_reproducible_names_the_reason_and_the_new_ops() -> None:
    reason = {"code": "trajectory_diverged",
              "message": "runs det-1 and det-2 diverge at step 2 in the backward pass"}
    ops = [{"op": "aten::index_add_", "file": "/nowhere/train.py", "line": 12},
           {"op": "aten::scatter_add_", "file": None, "line": None}]
    broken = document(
        "not_reproducible",
        reasons=[{"code": "candidate_not_reproducible",
                  "message": "the training is not reproducible in the candidate environment"}],
        reproducibility={"baseline": summary(), "candidate": summary("fail", None, [reason]),
                         "new_nondeterministic_ops": ops})
    text = upgrade_console.render(broken, SHOWN)
    assert lines(text)[0] == ("repro-gate upgrade: NOT REPRODUCIBLE: the training is not"
                              " reproducible in the candidate environment")
    assert ("  candidate: not reproducible: runs det-1 and det-2 diverge at step 2 in the"
            " backward pass") in lines(text)
    assert "    new nondeterministic op: aten::index_add_ at /nowhere/train.py:12" in lines(text)
    assert "    new nondeterministic op: aten::scatter_add_" in lines(text)
    assert "  cost of determinism: baseline +3.1% (95% interval +2.1% to +4.1%) -> candidate" \
        " inconclusive" in lines(text)
    assert markdown_upgrade.title(broken) == (
        "candidate not reproducible · runs det-1 and det-2 diverge at step 2 in the backward pass")
    assert "<code>aten::index_add_ at /nowhere/train.py:12</code>" in html(
        markdown_upgrade.report(broken))


def test_error_says_why_and_what_was_kept() -> None:
    failed = document(
        "error",
        reasons=[{"code": "lock_unresolvable",
                  "message": "the candidate lock does not resolve: no version of mathlib>=9"}],
        numerics={"status": "not_compared", "tolerance": "bitwise", "comparison": None},
        reproducibility={"baseline": summary(manifest="repro-gate-out/upgrade/baseline/"
                                                      "manifest.json"),
                         "candidate": None, "new_nondeterministic_ops": []},
        candidate={**document()["candidate"], "environment": None})
    text = upgrade_console.render(failed, SHOWN)
    assert lines(text) == [
        "repro-gate upgrade: ERROR: the upgrade check could not decide",
        "  lock_unresolvable: the candidate lock does not resolve: no version of mathlib>=9",
        "  kept: baseline manifest repro-gate-out/upgrade/baseline/manifest.json",
        "  kept: candidate lock repro-gate-out/upgrade/candidate.uv.lock",
        f"  report: {SHOWN}",
    ]
    assert markdown_upgrade.title(failed) == (
        "could not decide · the candidate lock does not resolve: no version of mathlib>=9")
    rendered = html(markdown_upgrade.report(failed))
    assert "<code>repro-gate-out/upgrade/baseline/manifest.json</code>" in rendered
    assert "no version of mathlib&gt;=9" in rendered


def test_an_incomplete_search_says_no_package_was_named() -> None:
    incomplete = changed([], culprit_search={
        "status": "incomplete", "runs": 8, "max_runs": 8, "note": "max_bisect_runs reached",
        "trials": [{"packages": ["mathlib"], "outcome": "skip", "step": None,
                    "note": "mathlib 1.1.0 does not install"}]}, bisect_runs=8)
    text = upgrade_console.render(incomplete, None)
    assert lines(text)[0].endswith(
        "numerics changed: no package named: the culprit search reached its bound")
    assert lines(text)[-1] == ("  culprit search: 8 runs (max 8), incomplete: its bound was"
                               " reached before it could decide: max_bisect_runs reached")
    assert markdown_upgrade.title(incomplete) == (
        "numerics changed · no package named: the culprit search reached its bound")
    assert "mathlib 1.1.0 does not install" in html(markdown_upgrade.report(incomplete))


def test_a_change_no_subset_reproduces_is_said_plainly() -> None:
    unfound = changed([], culprit_search={"status": "not_found", "runs": 4, "max_runs": 32,
                                          "trials": []}, bisect_runs=4)
    assert lines(upgrade_console.render(unfound, SHOWN))[0].endswith(
        "numerics changed: no package named: the culprit search found no subset that does it")
    assert "4 runs (max 32), no subset of the changes reproduced the change" in (
        upgrade_console.render(unfound, SHOWN))


def test_a_long_change_set_lists_the_direct_changes_and_a_count() -> None:
    many = [change("mathlib", "1.0.0", "1.1.0"), change("helperlib", "2.0", None, kind="removed")]
    many += [change(f"dep{i:02d}", "1.0", "1.1", direct=False) for i in range(20)]
    text = upgrade_console.render(document(changes=many), SHOWN)
    start = lines(text).index("  changes: 22 packages (2 direct, 20 transitive)")
    assert lines(text)[start + 1:start + 4] == [
        "    mathlib 1.0.0 -> 1.1.0 (upgraded, direct)",
        "    helperlib 2.0 (removed, direct)",
        "    and 20 more (see the report)",
    ]


def test_hostile_names_and_messages_stay_text() -> None:
    name = "evil`|<img src=x onerror=alert(1)>[x](https://e.example)\x1b[31m"
    message = "boom <script>alert(1)</script> | @octocat [link](https://e.example)\nsecond"
    hostile = changed([culprit(name, "1.0", "2.0")],
                      changes=[change(name, "1.0", "2.0")],
                      reasons=[{"code": "numerics_changed", "message": message}])
    hostile["gate"] = "gate <b>x</b>"
    text = upgrade_console.render(hostile, SHOWN)
    assert "\x1b" not in text and "\\x1b[31m" in text  # the terminal's colours stay off
    rendered = html(markdown_upgrade.report(hostile))
    assert "<script" not in rendered and "<img" not in rendered and "<b>" not in rendered
    assert "<a " not in rendered
    assert "@octocat" not in rendered and "@\u200boctocat" in rendered
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | @\u200boctocat [link](https://e.example)" \
        " second" in rendered
    # every row of every table keeps its columns: the name's `|` split nothing
    for table in rendered.split("<table>")[1:]:
        body = table.split("</table>")[0]
        header = body.count("<th>")
        assert all(row.count("<td>") == header for row in body.split("<tr>")[2:])
    # the name, whole and inert, in a code span; the terminal escape shown, not sent
    assert "<td><code>evil`|&lt;img src=x onerror=alert(1)&gt;[x](https://e.example)\\x1b[31m" \
        "</code></td>" in rendered
    assert "\x1b" not in rendered
    assert "\n" not in markdown_upgrade.title(hostile)
    assert "\x1b" not in markdown_upgrade.title(hostile)


def test_the_report_stays_within_githubs_limit() -> None:
    culprits = [culprit(f"package-{i:04d}-" + "x" * 150, "1.0", "2.0", group=i)
                for i in range(1500)]
    huge = changed(culprits, changes=[change(c["name"], "1.0", "2.0") for c in culprits])
    report = markdown_upgrade.report(huge)
    assert len(report) <= CHECK_TEXT_LIMIT
    assert report.count("<details") == report.count("</details>")
    assert len(lines(upgrade_console.render(huge, SHOWN))) < 40


@pytest.mark.parametrize("verdict", ["same", "changed", "not_reproducible", "error"])
def test_each_verdict_ties_its_reasons(verdict: str) -> None:
    """The schema holds the reasons to the verdict: `same` has none, the others lead with
    their own code."""
    wrong = copy.deepcopy(document())
    wrong["verdict"] = verdict
    wrong["reasons"] = [] if verdict != "same" else [{"code": "numerics_changed", "message": "x"}]
    assert validation.errors("upgrade", wrong) != []
