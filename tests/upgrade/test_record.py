"""`upgrade.json` assembled from what the check learned: the verdict and its reason, the locks,
the culprits with their largest difference, and the search (validated against the schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.compare.status import Numerics
from repro_gate.config import Config, ToleranceConfig
from repro_gate.config.model import UpgradeConfig
from repro_gate.environments import Environment, Lock, LockedPackage
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.pipeline import GateOutcome
from repro_gate.manifest.upgrade_document import UpgradeVerdict, validate_upgrade
from repro_gate.upgrade import Change, Outcome, Search, Trial
from repro_gate.upgrade.record import assemble
from repro_gate.upgrade.state import UpgradeState
from repro_gate.upgrade.trials import TrialRun

SHA = "0f" * 32
DIVERGENCE = {"step": 3, "parameters": ["fc.weight", "fc.bias", "head.weight", "emb.weight"],
              "runs": ["baseline", "candidate"], "cause": "forward", "loss_differs": True}


def config(tmp_path: Path, **upgrade: Any) -> Config:
    return Config(workdir=tmp_path, output_dir=tmp_path / "out", name="lm",
                  upgrade=UpgradeConfig(**upgrade))


def lock(path: Path, numpy: str) -> Lock:
    return Lock(path, "uv.lock", SHA, {"numpy": LockedPackage("numpy", numpy, True)})


def environment(path: Path, reused: bool) -> Environment:
    return Environment(path / "bin" / "python", SHA, {"numpy": "x"}, reused, path, ("numpy",))


def tensor_comparison(*diffs: float) -> dict[str, Any]:
    tensors = [{"name": f"t{n}", "max_abs_diff": diff, "max_rel_diff": diff / 10,
                "max_ulp": n + 1} for n, diff in enumerate(diffs)]
    return {"basis": "bitwise", "artifacts": [{"path": "model.pt", "tensors": tensors}],
            "first_divergence": DIVERGENCE}


def changed_state(tmp_path: Path) -> UpgradeState:
    state = UpgradeState(started_at="2030-01-01T00:00:00Z", started=0.0,
                         candidate_source="given", candidate_kept=tmp_path / "candidate.uv.lock")
    state.baseline = lock(tmp_path / "uv.lock", "1.26.4")
    state.candidate = lock(tmp_path / "candidate.uv.lock", "2.0.1")
    state.changes = [Change("numpy", "1.26.4", "2.0.1", "upgraded", direct=True)]
    state.environments = {"baseline": environment(tmp_path / "b", reused=True),
                          "candidate": environment(tmp_path / "c", reused=False)}
    state.numerics_status = Numerics.CHANGED
    state.comparison = {"basis": "bitwise", "artifacts": [],
                        "trajectory": {"steps_compared": 3, "status": "different"},
                        "first_divergence": DIVERGENCE}
    state.search = Search(groups=(("numpy",),), trials=(Trial(("numpy",), Outcome.CHANGED),),
                          complete=True)
    state.confirmations = [TrialRun(("numpy",), Outcome.CHANGED,
                                    comparison=tensor_comparison(0.25, float("nan"), 0.5, 0.1),
                                    step=3)]
    return state


def test_an_error_is_the_verdict_with_the_tools_explanation(tmp_path: Path) -> None:
    state = UpgradeState(started_at="2030-01-01T00:00:00Z", started=0.0,
                         error=GateError("cannot install the pins: no wheel",
                                         kind=ErrorKind.ENVIRONMENT, detail="uv: no wheel"))

    document = assemble(config(tmp_path), state)

    validate_upgrade(dict(document))
    assert document["verdict"] == UpgradeVerdict.ERROR
    assert document["reasons"] == [{"code": "environment",
                                    "message": "cannot install the pins: no wheel",
                                    "detail": "uv: no wheel"}]
    assert document["baseline"] == {"lock": "", "format": None, "sha256": None,
                                    "environment": None}
    assert document["culprit_search"]["status"] == "not_needed"
    assert (document["bisect_runs"], document["fingerprint_diff"], document["runs"]) == (
        0, None, [])


def test_a_numerics_change_names_where_it_diverges_and_the_culprit(tmp_path: Path) -> None:
    document = assemble(config(tmp_path, max_bisect_runs=5), changed_state(tmp_path))

    validate_upgrade(dict(document))
    assert document["verdict"] == UpgradeVerdict.CHANGED
    assert document["reasons"][0] == {
        "code": "numerics_changed",
        "message": "the numerics change with the candidate lock: they diverge at step 3"
                   " (forward; parameters fc.weight, fc.bias, head.weight and 1 more);"
                   " culprit: numpy"}
    assert document["candidate"]["lock"] == str(tmp_path / "candidate.uv.lock")
    assert document["candidate"]["source"] == "given"
    assert document["baseline"]["environment"] == {
        "path": str(tmp_path / "b"), "lock_sha256": SHA, "reused": True, "installed": 1}
    assert document["culprit_search"] == {"status": "found", "runs": 0, "max_runs": 5,
                                          "trials": []}


def test_a_culprit_carries_the_largest_finite_difference_of_its_evidence(
    tmp_path: Path,
) -> None:
    (culprit,) = assemble(config(tmp_path), changed_state(tmp_path))["culprits"]

    assert culprit == {"name": "numpy", "old": "1.26.4", "new": "2.0.1", "kind": "upgraded",
                       "group": 0, "first_divergence": DIVERGENCE, "max_abs_diff": 0.5,
                       "max_rel_diff": 0.05, "max_ulp_diff": 3, "artifact": "model.pt: t2"}


def test_an_incomplete_search_and_a_tolerance_are_recorded(tmp_path: Path) -> None:
    state = changed_state(tmp_path)
    state.comparison = None
    state.search = Search(groups=(("numpy",),), trials=(), complete=False)
    tolerance = ToleranceConfig(bitwise=False, atol=1e-6)

    document = assemble(config(tmp_path, tolerance=tolerance), state)

    assert document["reasons"][0]["message"] == (
        "the numerics change with the candidate lock: the artifacts or the losses differ"
        " beyond the tolerance; culprit: numpy")
    assert document["culprit_search"]["status"] == "incomplete"
    assert document["numerics"]["tolerance"] == {"atol": 1e-6, "rtol": 0.0}


def test_a_candidate_that_does_not_reproduce_is_not_reproducible(tmp_path: Path) -> None:
    manifest = {"verdict": "fail", "reasons": [{"code": "trajectory_diverged",
                                                "message": "runs A and B diverge at step 2"}],
                "nondeterministic_ops": [{"op": "aten::index_add_", "file": "m.py", "line": 4}]}
    state = UpgradeState(started_at="2030-01-01T00:00:00Z", started=0.0)
    state.gates["baseline"] = GateOutcome({"verdict": "pass", "reasons": [],
                                           "nondeterministic_ops": []}, None, 0)
    state.gates["candidate"] = GateOutcome(manifest, tmp_path / "c" / "manifest.json", 1)
    state.reused_gates.add("baseline")

    document = assemble(config(tmp_path), state)

    assert document["verdict"] == UpgradeVerdict.NOT_REPRODUCIBLE
    assert document["reasons"][0]["message"] == (
        "the training is not reproducible in the candidate environment:"
        " runs A and B diverge at step 2")
    reproducibility = document["reproducibility"]
    assert reproducibility["new_nondeterministic_ops"] == [
        {"op": "aten::index_add_", "file": "m.py", "line": 4}]
    assert reproducibility["baseline"]["reused"] is True
    assert reproducibility["candidate"]["manifest"] == str(tmp_path / "c" / "manifest.json")


def test_numerics_kept_is_the_verdict_same(tmp_path: Path) -> None:
    state = UpgradeState(started_at="2030-01-01T00:00:00Z", started=0.0,
                         numerics_status=Numerics.WITHIN_TOLERANCE)

    document = assemble(config(tmp_path), state)

    assert (document["verdict"], document["reasons"]) == (UpgradeVerdict.SAME, [])
