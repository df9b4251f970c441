"""The gate's comparison of run A with its golden trajectory: the manifest's
`comparison.golden`."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from repro_gate.config import Config
from repro_gate.config.model import DEFAULT_GOLDEN_PATH
from repro_gate.golden import (
    attribution,
    comparison,
    document,
    history,
    rebuild,
    renames,
    select,
)

CHANGED = comparison.CHANGED


def compare_with_golden(config: Config, run: document.RunData, candidate: dict[str, Any],
                        run_in: rebuild.RunIn | None = None) -> dict[str, Any]:
    """`comparison.golden` for run A: against the golden file of its machine class (or the one
    named), and, when the base branch holds another version of that file, against that too.
    `run_in` runs the training in the golden file's rebuilt software (run G), when both the
    software and the code changed. `candidate` is `run` made into a golden document."""
    machine_class = candidate["machine_class"]
    choice = select.choose(config, machine_class)
    root = history.repo_root(config.workdir) or config.workdir
    result: dict[str, Any] = {
        "status": comparison.NO_GOLDEN,
        "path": select.shown(choice.path if choice.named else choice.folder, root),
        "machine_class": machine_class,
        "golden_machine_class": None,
        "bless_command": bless_command(config),
        "software_diff": [],
        "steps_compared": 0,
        "artifacts_compared": 0,
        "first_divergence": None,
        "largest_difference": None,
        "loss_delta": [],
        "attribution": None,
        "against_base": None,
        "renamed": [],
    }
    if not choice.path.is_file():
        return result
    golden = document.read(choice.path)
    tolerance = comparison.Tolerance.from_config(config.golden.tolerance)
    result["path"] = select.shown(choice.path, root)
    result["golden_machine_class"] = golden["machine_class"]
    compared, renamed = compare_renamed(golden, candidate, run, tolerance)
    result.update(compared)
    result["renamed"] = [{"golden": rename.golden, "run": rename.run} for rename in renamed]
    result["software_diff"] = attribution.software_diff(golden["software"],
                                                        candidate["software"])
    if result["status"] == CHANGED:
        commit = golden["software"].get("commit")
        changed = history.changed_since(config.workdir, commit) if commit else None
        folders = [select.shown(choice.folder, root), select.shown(config.output_dir, root)]
        facts = attribution.training_facts_diff(golden["software"], candidate["software"])
        result["attribution"] = attribution.attribute(result["software_diff"], changed, folders,
                                                      commit, facts)
        if run_in is not None and attribution.both_changed(result["software_diff"], changed,
                                                           folders):
            result["attribution"] = attribute_by_rebuild(config, golden, run, result, run_in,
                                                         tolerance)
    result["against_base"] = against_base(config.workdir, result["path"], golden, candidate,
                                          run, tolerance)
    return result


def compare_renamed(golden: dict[str, Any], candidate: dict[str, Any], run: document.RunData,
                    tolerance: comparison.Tolerance
                    ) -> tuple[dict[str, Any], list[renames.Rename]]:
    """Run A (`candidate`, made from `run`) against `golden` under the golden file's tensor
    names, and the tensors renamed to get there."""
    view = renames.under_golden_names(golden, candidate, run.trajectory)
    return (comparison.compare(golden, view.document, tolerance, view.renamed_artifacts),
            view.renamed)


def attribute_by_rebuild(config: Config, golden: dict[str, Any], run: document.RunData,
                         result: dict[str, Any], run_in: rebuild.RunIn,
                         tolerance: comparison.Tolerance) -> dict[str, str]:
    """Both changed: run G, the code in the golden file's rebuilt software, against the golden
    trajectory decides; `unknown` with the reason when it cannot be rebuilt."""
    outcome = rebuild.rebuild_and_run(config, golden, result["software_diff"], run_in)
    if isinstance(outcome, str):
        return attribution.not_rebuilt(result["attribution"], outcome)
    data = rebuild.with_fingerprint(outcome, run.fingerprint)
    status = compare_renamed(golden, document.build(data, now()), data, tolerance)[0]["status"]
    return attribution.by_rebuild(status != CHANGED)


def against_base(workdir: Path, rel_path: str, golden: dict[str, Any],
                 candidate: dict[str, Any], run: document.RunData,
                 tolerance: comparison.Tolerance) -> dict[str, Any] | None:
    """Run A against the base branch's version of the golden file, when the pull request
    changed that file (it re-blessed); None otherwise."""
    found = history.base_version(workdir, rel_path)
    if found is None:
        return None
    ref, text = found
    base = document.parse(text)
    if base is None or base == golden:
        return None
    compared = compare_renamed(base, candidate, run, tolerance)[0]
    return {"path": f"{ref}:{rel_path}", "status": compared["status"],
            "first_divergence": compared["first_divergence"],
            "largest_difference": compared["largest_difference"],
            "loss_delta": compared["loss_delta"]}


def bless_command(config: Config) -> str:
    """The command that writes (or updates) the golden file of this run."""
    words = ["repro-gate", "bless"]
    if config.config_file is not None:
        words += ["--config", select.shown(config.config_file, Path.cwd())]
    if config.golden.path != DEFAULT_GOLDEN_PATH and config.config_file is None:
        words += ["--golden", select.shown(select.configured(config), Path.cwd())]
    manifest = config.output_dir / "manifest.json"
    words += ["--manifest", select.shown(manifest, Path.cwd())]
    return " ".join(words)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
