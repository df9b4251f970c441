"""Publishing an upgrade check (`repro-gate upgrade`, the action's `mode: upgrade`).

The same channels as a gate run, through the same code: the GitHub reporter (check run named
"repro-gate upgrade / <gate>", commit status, a sticky comment with a marker of its own, so it
stands beside the gate's comment on the same pull request) and the Actions step (outputs, job
summary, an error annotation when the numerics changed). No metrics are pushed: the
reproducibility SLIs count gate runs only.

The text comes from `render/markdown_upgrade.py`. Nothing here changes the verdict: GitHub's
failures are recorded in the `reporting` section and shown as a warning, the step's as a warning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from repro_gate import notices
from repro_gate.config import Config
from repro_gate.manifest.upgrade_document import GATE_VERDICTS, UpgradeVerdict
from repro_gate.publish import actions
from repro_gate.publish.github.rendering import Rendering
from repro_gate.publish.github.reporter import GitHubReporter
from repro_gate.render.markdown import COMMENT_LIMIT, truncate

CHECK_NAME_PREFIX = "repro-gate upgrade / "


def check_name(gate: str) -> str:
    """The check run's name (and the status context) of an upgrade check of `gate`."""
    return f"{CHECK_NAME_PREFIX}{gate}"


def comment_marker(gate: str) -> str:
    """The hidden marker of the upgrade comment; it never contains the gate's own marker."""
    return f"<!-- repro-gate-upgrade:{gate} -->"


def gate_verdict(document: Mapping[str, Any]) -> str:
    """pass, fail or error: what the upgrade verdict means for a workflow."""
    return GATE_VERDICTS.get(str(document.get("verdict")), "error")


def title(document: Mapping[str, Any]) -> str:
    """One line for the check run's title and the status description."""
    # Imported here: the Markdown is written beside this module and only needed when posting.
    from repro_gate.render import markdown_upgrade

    return markdown_upgrade.title(dict(document))


def report(document: Mapping[str, Any]) -> str:
    """The Markdown report: check-run summary, job summary and the comment's body."""
    from repro_gate.render import markdown_upgrade

    return markdown_upgrade.report(dict(document))


def comment(document: Mapping[str, Any]) -> str:
    """The sticky comment: the report, then the hidden marker, within GitHub's limit."""
    marker = comment_marker(str(document.get("gate") or "repro-gate"))
    return truncate(report(document), COMMENT_LIMIT - len(marker) - 2) + "\n" + marker + "\n"


def new_ops(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ops the candidate made nondeterministic: annotated on the check run at their line."""
    reproducibility = document.get("reproducibility") or {}
    return list(reproducibility.get("new_nondeterministic_ops") or [])


UPGRADE_RENDERING = Rendering(
    name=check_name,
    marker=comment_marker,
    title=title,
    summary=report,
    details=None,  # the summary holds the whole report
    comment=comment,
    verdict=gate_verdict,
    ops=new_ops,
)


def outputs_for(document: Mapping[str, Any], path: Path | None) -> dict[str, str]:
    """The step outputs: verdict (mapped), upgrade-verdict, upgrade-report, culprits."""
    names = dict.fromkeys(str(c.get("name")) for c in document.get("culprits") or [])
    return {
        "verdict": gate_verdict(document),
        "upgrade-verdict": str(document.get("verdict", "error")),
        "upgrade-report": "" if path is None else str(path),
        "culprits": ",".join(names),
    }


def changed_annotations(document: Mapping[str, Any]) -> list[str]:
    """An `::error` on the step when the numerics changed: the title says which package."""
    if document.get("verdict") != UpgradeVerdict.CHANGED:
        return []
    return [actions.annotation("error", title(document),
                               title="repro-gate upgrade: numerics changed")]


def publish_to_actions(
    document: Mapping[str, Any],
    path: Path | None,
    environ: Mapping[str, str],
    stream: TextIO | None = None,
) -> None:
    """Outputs, job summary and annotation for the step; each failure is a warning only."""
    if not actions.in_actions(environ):
        return
    steps: tuple[Callable[[], object], ...] = (
        lambda: actions.set_outputs(outputs_for(document, path), environ),
        lambda: actions.write_summary(report(document), environ),
        lambda: actions.emit_all(changed_annotations(document), stream),
    )
    for step in steps:
        try:
            step()
        except Exception as error:  # publishing must never change the verdict
            message = f"repro-gate: could not publish to Actions: {error}"
            actions.emit(actions.annotation("warning", message), stream)


@dataclass
class UpgradePublisher:
    """The `Publisher` of an upgrade check: GitHub when active, then the Actions step."""

    github: GitHubReporter | None
    environ: Mapping[str, str]

    def started(self) -> None:
        """The check run goes `in_progress`."""
        if self.github is not None:
            self.github.started()

    def finished(self, document: Mapping[str, Any], manifest_path: Path | None
                 ) -> dict[str, Any]:
        """Post the report; returns `{"reporting": …}` when GitHub reporting was set up."""
        sections: dict[str, Any] = {}
        if self.github is not None:
            sections["reporting"] = self.github.finished(document)
            _warn_when_failed(sections["reporting"], self.environ)
        publish_to_actions({**document, **sections}, manifest_path, self.environ)
        return sections


def _warn_when_failed(section: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """A report GitHub did not take is a warning on the step, never an error."""
    if not section.get("active") or section.get("ok"):
        return
    errors = section.get("errors") or ["reporting failed"]
    message = f"github: the upgrade report was not posted: {errors[0]}"
    notices.say(message)
    if actions.in_actions(environ):
        actions.emit(actions.annotation("warning", notices.PREFIX + message))


def for_upgrade(config: Config, environ: Mapping[str, str] | None = None) -> UpgradePublisher:
    """Everything an upgrade check publishes: GitHub and the Actions step (no metrics)."""
    environ = os.environ if environ is None else environ
    reporter = GitHubReporter.from_environment(
        config.name, config.report, environ, rendering=UPGRADE_RENDERING
    )
    return UpgradePublisher(reporter, environ)


def for_upgrade_configuration_error(environ: Mapping[str, str] | None = None
                                    ) -> UpgradePublisher:
    """A check that could not start: the Actions step only, as for the gate's own
    configuration errors (no check run or comment for a workflow's typo)."""
    return UpgradePublisher(None, os.environ if environ is None else environ)
