"""Report a gate run to GitHub: check run, commit status, sticky comment; never raises.

Order in `finished()`: the check run (completed with summary, details and annotations), then a
commit status (always when configured, else only when check runs can't be written), then the
sticky comment on the pull request.

Whose comment is ours: `GET /user` answers 403 for installation tokens (GITHUB_TOKEN included),
so the identity comes from our own writes instead. A check run names the App that created it
(`app.slug`; comments by that App are authored by `<slug>[bot]`), and a commit status names its
`creator` (the user of a personal token). Without either, `github-actions[bot]` is assumed.

A `pull_request` from a fork gets a read-only token: nothing is written, and the section says the
results will be posted by the trusted `workflow_run` job. The same happens when every write is
refused with "Resource not accessible by integration".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from repro_gate import notices
from repro_gate.config import ReportConfig
from repro_gate.errors import GitHubError, one_line
from repro_gate.publish.github import checks, comments, statuses
from repro_gate.publish.github.client import DEFAULT_API_URL, GitHubClient, RetryPolicy
from repro_gate.publish.github.event import Commit, EventContext, context_from_environment
from repro_gate.publish.github.rendering import GATE_RENDERING, Rendering, as_posted

FALLBACK_IDENTITY = "github-actions[bot]"
TOKEN_VARIABLES = ("INPUT_GITHUB-TOKEN", "GITHUB_TOKEN")
def token_from_environment(environ: Mapping[str, str]) -> str | None:
    """The action input `github-token` (hyphen kept by the runner), else GITHUB_TOKEN."""
    for name in TOKEN_VARIABLES:
        if environ.get(name):
            return environ[name]
    return None


def client_from_environment(
    environ: Mapping[str, str], token: str, policy: RetryPolicy | None = None
) -> GitHubClient:
    """A client for GITHUB_API_URL (GHES: `https://host/api/v3`), default api.github.com."""
    return GitHubClient(environ.get("GITHUB_API_URL") or DEFAULT_API_URL, token, policy=policy)


class GitHubReporter:
    """Posts one gate run's results; inactive (does nothing) outside Actions or without token."""

    def __init__(
        self,
        gate: str,
        settings: ReportConfig,
        context: EventContext | None,
        client: GitHubClient | None,
        inactive_reason: str | None = None,
        rendering: Rendering = GATE_RENDERING,
    ) -> None:
        self.gate = gate
        self.rendering = rendering
        self.settings = settings
        self.context = context
        self.client = client
        self.inactive_reason = inactive_reason
        if inactive_reason is None and (client is None or context is None):
            self.inactive_reason = "no GitHub client"
        self._check_run: checks.CheckRun | None = None
        self._check_error: GitHubError | None = None

    @classmethod
    def from_environment(
        cls,
        gate: str,
        settings: ReportConfig,
        environ: Mapping[str, str] | None = None,
        *,
        policy: RetryPolicy | None = None,
        rendering: Rendering = GATE_RENDERING,
    ) -> GitHubReporter:
        """A reporter for the current Actions run; inactive outside Actions or without token."""
        environ = os.environ if environ is None else environ
        token = token_from_environment(environ)
        reason = None
        if not settings.enabled:
            reason = "reporting disabled in the configuration"
        elif environ.get("GITHUB_ACTIONS") != "true":
            reason = "not running in GitHub Actions"
        elif not token:
            reason = "no GitHub token (input github-token or GITHUB_TOKEN)"
        if reason:
            return cls(gate, settings, None, None, inactive_reason=reason, rendering=rendering)
        assert token is not None
        policy = policy or RetryPolicy(budget=settings.timeout)
        context = context_from_environment(environ)
        return cls.for_context(
            gate, settings, context, client_from_environment(environ, token, policy), rendering
        )

    @classmethod
    def for_context(
        cls, gate: str, settings: ReportConfig, context: EventContext, client: GitHubClient,
        rendering: Rendering = GATE_RENDERING,
    ) -> GitHubReporter:
        """A reporter for an explicit commit and pull request (used by `repro-gate report`)."""
        reason = None
        if not context.repository:
            reason = "no repository (GITHUB_REPOSITORY)"
        elif not context.sha:
            reason = "no commit SHA (GITHUB_SHA or the event payload)"
        return cls(gate, settings, context, client, inactive_reason=reason, rendering=rendering)

    @property
    def active(self) -> bool:
        """Whether this reporter talks to GitHub at all."""
        return self.inactive_reason is None

    @property
    def name(self) -> str:
        """Check-run name and status context."""
        return self.rendering.name(self.gate)

    def started(self) -> None:
        """Create the `in_progress` check run (and a pending status when always on)."""
        if not self.active or self.context is None or self.context.fork:
            return
        client, context, commit = self._client_and_context()
        client.reset_budget()
        if self.settings.check_run:
            try:
                self._check_run = checks.create_check_run(
                    client,
                    commit.repository,
                    name=self.name,
                    head_sha=commit.sha,
                    details_url=context.run_url,
                )
            except GitHubError as error:
                self._check_error = error
                _log(f"check run not created: {error}")
        if self.settings.status == "always":
            try:
                statuses.post_status(
                    client,
                    commit.repository,
                    commit.sha,
                    state="pending",
                    context=self.name,
                    description="reproducibility runs in progress",
                    target_url=context.run_url,
                )
            except GitHubError as error:
                _log(f"pending status not posted: {error}")

    def finished(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Post everything for the finished run; return the manifest's `reporting` section."""
        if not self.active:
            return {"active": False, "ok": True, "reason": self.inactive_reason or "inactive"}
        try:
            return self._finish(manifest)
        except Exception as error:  # reporting must never cost the verdict or the manifest
            _log(f"reporting failed unexpectedly: {type(error).__name__}: {one_line(error)}")
            section = self._section()
            section["ok"] = False
            section["errors"].append(one_line(f"unexpected {type(error).__name__}: {error}", 500))
            return section

    def _finish(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        client, context, _ = self._client_and_context()
        client.reset_budget()
        section = self._section()
        if context.fork:
            return self._deferred(section, "pull request from a fork: the token is read-only")
        preview = as_posted(manifest, context.run_url)
        refused: list[str] = []  # channels that got "Resource not accessible by integration"
        wrote = False

        check_unavailable = False
        if self.settings.check_run:
            wrote, check_unavailable = self._post_check_run(preview, section, refused)
        else:
            section["check_run"] = {"outcome": "disabled"}

        wants_status = self.settings.status == "always" or (
            self.settings.status == "fallback" and check_unavailable
        )
        creator = None
        if wants_status:
            creator = self._post_status(preview, section, refused)
            wrote = wrote or creator is not None
        else:
            why = "disabled" if self.settings.status == "never" else "skipped"
            section["status"] = {"outcome": why, "reason": "the check run carries the result"}
            if check_unavailable and self.settings.status == "never":
                section["check_run"]["outcome"] = "failed"

        if refused and not wrote:
            return self._deferred(section, "the token is read-only (" + ", ".join(refused) + ")")

        section["identity"] = self._identity(creator)
        wrote = self._post_comment(preview, section, section["identity"], refused) or wrote
        if refused and not wrote:
            return self._deferred(section, "the token is read-only (" + ", ".join(refused) + ")")
        section["ok"] = not any(
            section[channel].get("outcome") == "failed"
            for channel in ("check_run", "status", "comment")
        )
        section["elapsed_seconds"] = round(client.policy.budget - client.remaining(), 3)
        return section

    def _post_check_run(
        self, manifest: Mapping[str, Any], section: dict[str, Any], refused: list[str]
    ) -> tuple[bool, bool]:
        """Complete (or create) the check run; returns (written, unavailable)."""
        client, context, commit = self._client_and_context()
        rendering = self.rendering
        annotations, _ = checks.annotations_for_ops(rendering.ops(manifest), context.workspace)
        output = {"title": rendering.title(manifest), "summary": rendering.summary(manifest)}
        if rendering.details is not None:
            output["text"] = rendering.details(manifest)
        conclusion = {"pass": "success", "fail": "failure"}.get(
            rendering.verdict(manifest), self.settings.error_conclusion
        )
        error = self._check_error
        try:
            if error is not None and error.unavailable:
                raise error  # refused at the start: don't knock on the same door twice
            if self._check_run is not None:
                run = checks.complete_check_run(
                    client,
                    commit.repository,
                    self._check_run.id,
                    conclusion=conclusion,
                    output=output,
                    annotations=annotations,
                )
            else:
                run = checks.create_check_run(
                    client,
                    commit.repository,
                    name=self.name,
                    head_sha=commit.sha,
                    details_url=context.run_url,
                    status="completed",
                    conclusion=conclusion,
                    output=output,
                    annotations=annotations,
                )
        except GitHubError as failure:
            outcome = "unavailable" if failure.unavailable else "failed"
            _record_failure(section, "check_run", "check run", failure, refused, outcome)
            return False, failure.unavailable
        self._check_run = run
        section["check_run"] = {
            "outcome": "created",
            "id": run.id,
            "url": run.html_url,
            "annotations": len(annotations),
            "conclusion": conclusion,
        }
        return True, False

    def _post_status(
        self, manifest: Mapping[str, Any], section: dict[str, Any], refused: list[str]
    ) -> str | None:
        """Post the commit status; returns the creator's login, or None when it failed."""
        client, context, commit = self._client_and_context()
        state = statuses.STATES.get(self.rendering.verdict(manifest), "error")
        try:
            status = statuses.post_status(
                client,
                commit.repository,
                commit.sha,
                state=state,
                context=self.name,
                description=self.rendering.title(manifest),
                target_url=context.run_url,
            )
        except GitHubError as failure:
            _record_failure(section, "status", "commit status", failure, refused)
            if section["check_run"].get("outcome") == "unavailable":
                section["check_run"]["outcome"] = "failed"  # the fallback failed too
            return None
        section["status"] = {"outcome": "created", "id": status.id, "state": state}
        return status.creator or FALLBACK_IDENTITY

    def _post_comment(
        self, manifest: Mapping[str, Any], section: dict[str, Any], identity: str,
        refused: list[str],
    ) -> bool:
        """Create or update the sticky comment; returns whether it was written."""
        client, context, commit = self._client_and_context()
        if not self.settings.comment:
            section["comment"] = {"outcome": "disabled"}
            return False
        if context.pull_request is None:
            section["comment"] = {"outcome": "skipped", "reason": "not a pull request"}
            return False
        try:
            result = comments.upsert_sticky_comment(
                client,
                commit.repository,
                context.pull_request,
                marker=self.rendering.marker(self.gate),
                body=self.rendering.comment({**manifest, "gate": self.gate}),
                author=identity,
            )
        except GitHubError as failure:
            _record_failure(section, "comment", "comment", failure, refused)
            return False
        section["comment"] = {"outcome": result.action, "id": result.id, "url": result.html_url}
        return True

    def _identity(self, status_creator: str | None) -> str:
        if self._check_run is not None and self._check_run.app_slug:
            return f"{self._check_run.app_slug}[bot]"
        return status_creator or FALLBACK_IDENTITY

    def _section(self) -> dict[str, Any]:
        context = self.context
        return {
            "active": True,
            "ok": True,
            "repository": context.repository if context else None,
            "sha": context.sha if context else None,
            "pull_request": context.pull_request if context else None,
            "event": context.event_name if context else None,
            "run_url": context.run_url if context else None,
            "deferred": False,
            "check_run": {"outcome": "skipped"},
            "status": {"outcome": "skipped"},
            "comment": {"outcome": "skipped"},
            "errors": [],
        }

    def _deferred(self, section: dict[str, Any], reason: str) -> dict[str, Any]:
        _log(f"results not posted: {reason}; the trusted workflow_run job will post them")
        section.update(deferred=True, ok=True, reason=reason)
        section["errors"] = []
        for channel in ("check_run", "status", "comment"):
            section[channel] = {"outcome": "deferred", "reason": reason}
        return section

    def _client_and_context(self) -> tuple[GitHubClient, EventContext, Commit]:
        # Only called while active, which needs a client and a context with repository and SHA.
        assert self.client is not None and self.context is not None
        assert self.context.repository and self.context.sha
        return self.client, self.context, Commit(self.context.repository, self.context.sha)


def _record_failure(
    section: dict[str, Any], key: str, label: str, failure: GitHubError, refused: list[str],
    outcome: str = "failed",
) -> None:
    """Record a write that GitHub refused or that failed, in the section and the log."""
    if failure.read_only:
        refused.append(label)
    section[key] = {"outcome": outcome, "reason": str(failure)[:500]}
    section["errors"].append(f"{label}: {failure}"[:500])
    _log(f"{label} failed: {failure}")


def _log(message: str) -> None:
    notices.say(f"github: {message}")
