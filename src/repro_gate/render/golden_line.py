"""The one line every report gives the golden comparison (`comparison.golden`): console, check
run, pull-request comment and job summary all say it in these words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_RENAMES_SHOWN = 3


def golden_line(golden: Mapping[str, Any] | None) -> str | None:
    """The line, or None when the gate did not compare with a golden trajectory."""
    if not golden:
        return None
    path = f"`{golden['path']}`"
    status = golden["status"]
    if status == "no_golden":
        return (f"no golden trajectory for machine class `{golden['machine_class']}` in {path}:"
                f" create it with `{golden['bless_command']}`")
    if status == "same":
        line = f"numerics unchanged against {path}"
    elif status == "within_tolerance":
        line = f"numerics within tolerance of {path}{_at(golden.get('first_divergence'))}"
    else:
        line = f"numerics changed against {path}{_at(golden.get('first_divergence'))}"
        line += _attribution(golden.get("attribution"))
    line += _other_class(golden) + _renamed(golden.get("renamed"))
    base = golden.get("against_base")
    if base:
        line += (f"; against the base branch's `{base['path']}`: {_status(base['status'])}"
                 f"{_at(base.get('first_divergence'))}")
    return line


def _at(divergence: Mapping[str, Any] | None) -> str:
    if not divergence:
        return ""
    if divergence.get("step", 0) == 0:
        return f" ({divergence['detail']})"
    return f" at step {divergence['step']} ({divergence['cause']})"


def _attribution(attribution: Mapping[str, Any] | None) -> str:
    if not attribution:
        return ""
    if attribution["kind"] == "unknown":
        return f", cause unknown: {attribution['reason']}"
    return f", caused by the {attribution['kind']}"


def _other_class(golden: Mapping[str, Any]) -> str:
    recorded = golden.get("golden_machine_class")
    if recorded and recorded != golden["machine_class"]:
        return f" (recorded on `{recorded}`, this run on `{golden['machine_class']}`)"
    return ""


def _renamed(renamed: list[Mapping[str, str]] | None) -> str:
    """Tensors compared under their golden names: a checkpoint of the old names no longer loads
    strictly, which no comparison of values shows."""
    if not renamed:
        return ""
    shown = ", ".join(f"{pair['golden']} -> {pair['run']}" for pair in renamed[:MAX_RENAMES_SHOWN])
    more = len(renamed) - MAX_RENAMES_SHOWN
    shown += f" and {more} more" if more > 0 else ""
    return (f"; tensors renamed ({shown}): checkpoints saved under the old names will not load"
            " with `load_state_dict(strict=True)`")


def _status(status: str) -> str:
    return {"same": "unchanged", "within_tolerance": "within tolerance"}.get(status, status)


def golden_of(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The manifest's `comparison.golden` (None in older manifests and when not compared)."""
    comparison = manifest.get("comparison")
    golden = comparison.get("golden") if isinstance(comparison, Mapping) else None
    return golden if isinstance(golden, Mapping) else None


def numerics_markdown(manifest: Mapping[str, Any]) -> str:
    """The line as a paragraph of the summary, the check run and the comment ("" when none)."""
    golden = golden_of(manifest)
    line = golden_line(golden)
    if not line:
        return ""
    return f"**Numerics:** {line}" + candidate_sentence(golden)


def candidate_sentence(golden: Mapping[str, Any] | None) -> str:
    """Where this run's own golden file was written, and how a pull request commits it."""
    if not golden or not golden.get("candidate"):
        return ""
    return (f"\n\nThis run's golden file is `{golden['candidate']}` (upload the output directory"
            " as an artifact to keep it). To bless these numbers, commit it as the file"
            f" compared, or run `{golden['bless_command']}`.")


def numerics_changed_only(manifest: Mapping[str, Any]) -> bool:
    """The gate failed on the golden comparison alone: the runs themselves reproduced."""
    codes = {reason.get("code") for reason in manifest.get("reasons") or []}
    return manifest.get("verdict") == "fail" and "numerics_changed" in codes and codes <= {
        "numerics_changed", "bitwise_equal", "within_tolerance", "cost_over_budget"}
