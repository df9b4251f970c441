"""Publishing a gate run: GitHub (check run, status, comment), the Actions runtime (outputs,
summary, annotations) and the Pushgateway.

The gate decides and records; a publisher is told when the runs start and when the verdict is
final, and hands back the manifest sections it produced. Nothing here changes a verdict or an
exit code: every part catches its own failures and records them in its section.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from repro_gate import notices
from repro_gate.config import Config, MetricsConfig
from repro_gate.manifest.store import MANIFEST_NAME
from repro_gate.publish import actions
from repro_gate.publish.github.reporter import GitHubReporter
from repro_gate.publish.metrics.pushgateway import push_manifest
from repro_gate.publish.upgrade_report import for_upgrade as for_upgrade


class Publisher(Protocol):
    """What the gate calls around its runs."""

    def started(self) -> None:
        """The runs are about to start (a check run goes `in_progress`)."""
        ...

    def finished(self, document: Mapping[str, Any], manifest_path: Path | None
                 ) -> dict[str, Any]:
        """The verdict is final and written: publish it; return the sections to add to it."""
        ...


@dataclass
class RuntimePublisher:
    """Publishes to whatever the environment offers; a part left out is not published to."""

    github: GitHubReporter | None
    metrics: MetricsConfig | None
    environ: Mapping[str, str]

    def started(self) -> None:
        """Tell GitHub the gate is running."""
        if self.github is not None:
            self.github.started()

    def finished(self, document: Mapping[str, Any], manifest_path: Path | None
                 ) -> dict[str, Any]:
        """GitHub, then the Pushgateway, then the Actions step (which shows both outcomes)."""
        sections: dict[str, Any] = {}
        if self.github is not None:
            sections["reporting"] = with_report_retry(
                self.github.finished(document), manifest_path or _manifest_path(document)
            )
        if self.metrics is not None:
            output_dir = Path(document["output_dir"])
            sections["metrics"] = push_manifest(
                {**document, **sections}, self.metrics, output_dir, self.environ
            )
        actions.publish({**document, **sections}, self.environ, manifest_path=manifest_path)
        return sections


def with_report_retry(section: dict[str, Any], manifest_path: Path) -> dict[str, Any]:
    """A failed report gets the command that posts it later, in the section and on stderr."""
    if not section.get("active") or section.get("ok"):
        return section
    retry = shlex.join(["repro-gate", "report", "--manifest", str(manifest_path.absolute())])
    notices.say(f"github: reporting failed; post it later with `{retry}`")
    return {**section, "retry": retry}


def _manifest_path(document: Mapping[str, Any]) -> Path:
    return Path(document["output_dir"]) / MANIFEST_NAME


def for_gate(config: Config, environ: Mapping[str, str] | None = None) -> RuntimePublisher:
    """Everything a gate run publishes: GitHub, the Pushgateway and the Actions step."""
    environ = os.environ if environ is None else environ
    reporter = GitHubReporter.from_environment(config.name, config.report, environ)
    return RuntimePublisher(reporter, config.metrics, environ)


def for_configuration_error(environ: Mapping[str, str] | None = None) -> RuntimePublisher:
    """A gate that never started publishes its error to the Actions step only."""
    return RuntimePublisher(None, None, os.environ if environ is None else environ)
