"""`repro-gate report`: post a finished run's manifest to GitHub (check run, status, comment).

Made for the fork-safe pattern: the `pull_request` job runs the gate with a read-only token and
uploads the manifest; a trusted `workflow_run` job downloads it and runs this command, which
takes the pull request and head SHA from the `workflow_run` payload (or `--pr`/`--sha`). For a
fork the payload lists no pull request: it is looked up by the run's head repository and branch,
and nothing is posted unless its head is still the run's `head_sha`.

`--markdown` prints instead what would be posted (the comment, the check run's title and
summary) and the job summary, locally: no token, no request.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from repro_gate import manifest as manifest_file
from repro_gate.config import ReportConfig, recorded_section
from repro_gate.errors import GateError, ReportInputError
from repro_gate.publish.actions import fit_summary
from repro_gate.publish.github.client import RetryPolicy
from repro_gate.publish.github.event import context_from_environment
from repro_gate.publish.github.pulls import pull_request_for_head
from repro_gate.publish.github.rendering import GATE_RENDERING, as_posted
from repro_gate.publish.github.reporter import (
    GitHubReporter,
    client_from_environment,
    token_from_environment,
)
from repro_gate.render.markdown import summary_markdown

EXIT_REPORTED = 0
# A failed report is an error, not a verdict: exit 1 is kept for "not reproducible".
EXIT_REPORTING_FAILED = 2


def add_parser(subparsers: Any, name: str) -> None:
    """Register `report` and its options."""
    parser = subparsers.add_parser(
        name,
        help="post a manifest's results to GitHub (check run, status, PR comment)",
        description=(
            "Post the results of an earlier gate run to GitHub: a check run with annotations,"
            " a commit status and the sticky pull-request comment. Exit 0 when reporting"
            " worked, 2 when some of it failed or the input is bad."
        ),
    )
    parser.add_argument("--manifest", required=True, type=Path, help="manifest.json of the run")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the PR comment, the check run's title and summary and the job summary"
        " instead of posting them (needs no token, sends nothing)",
    )
    parser.add_argument("--sha", help="commit to report on (default: from the event)")
    parser.add_argument("--pr", type=int, help="pull request number (default: from the event)")
    parser.add_argument("--repo", help="OWNER/NAME (default: GITHUB_REPOSITORY)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=RetryPolicy.budget,
        help="seconds allowed for GitHub requests and retries (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    """`repro-gate report`: its flags as `report`'s parameters."""
    return report(args.manifest, markdown=args.markdown, sha=args.sha, pr=args.pr,
                  repo=args.repo, timeout=args.timeout)


def report(
    manifest_path: Path,
    *,
    markdown: bool = False,
    sha: str | None = None,
    pr: int | None = None,
    repo: str | None = None,
    timeout: float = RetryPolicy.budget,
) -> int:
    """Post the manifest; record the outcome in its `reporting` section."""
    manifest = manifest_file.read(manifest_path)
    if markdown:
        print(preview(manifest), end="")
        return EXIT_REPORTED
    environ = os.environ
    token = token_from_environment(environ)
    if not token:
        raise ReportInputError("no GitHub token: set the github-token input or GITHUB_TOKEN")
    if repo is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ReportInputError(f"--repo must be OWNER/NAME, got {repo!r}")
    if sha is not None and not re.fullmatch(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}", sha):
        raise ReportInputError(f"--sha must be a full commit SHA, got {sha!r}")
    if pr is not None and pr < 1:
        raise ReportInputError(f"--pr must be a pull request number, got {pr}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ReportInputError("--timeout must be a positive number of seconds")

    context = context_from_environment(environ)
    context = dataclasses.replace(
        context,
        repository=repo or context.repository,
        sha=(sha or context.sha or "").lower() or None,
        pull_request=pr or context.pull_request,
    )
    recorded = recorded_section(manifest.get("config"), "report", str(manifest_path))
    settings = ReportConfig(**recorded)
    client = client_from_environment(environ, token, RetryPolicy(budget=timeout))
    if context.pull_request is None and context.head_label and context.repository and context.sha:
        number = pull_request_for_head(client, context.repository, context.head_label, context.sha)
        context = dataclasses.replace(context, pull_request=number)
    reporter = GitHubReporter.for_context(str(manifest["gate"]), settings, context, client)
    if not reporter.active:
        raise ReportInputError(f"nothing to report on: {reporter.inactive_reason}; see --help")

    section = reporter.finished(manifest)
    manifest["reporting"] = section
    try:
        manifest_file.update(manifest_path, manifest)
    except (GateError, OSError) as error:
        # Reporting happened; its record is what failed, so the old manifest stays.
        print(f"repro-gate: could not update {manifest_path}: {error}", file=sys.stderr)
    channels = ", ".join(
        f"{name.replace('_', ' ')} {section[name]['outcome']}"
        for name in ("check_run", "status", "comment")
    )
    print(f"repro-gate: reported {context.repository}@{(context.sha or '')[:12]}: {channels}")
    # Deferred here means the token could not write: in the trusted job that is a failure.
    return EXIT_REPORTED if section["ok"] and not section["deferred"] else EXIT_REPORTING_FAILED



def preview(manifest: dict[str, Any]) -> str:
    """The texts GitHub would show, each under its heading, as the publishers render them."""
    run_url = (manifest.get("reporting") or {}).get("run_url")
    posted = as_posted(manifest, run_url if isinstance(run_url, str) else None)
    sections = (
        ("Pull request comment", GATE_RENDERING.comment(posted)),
        ("Check run title", GATE_RENDERING.title(posted) + "\n"),
        ("Check run summary", GATE_RENDERING.summary(posted)),
        ("Job summary", fit_summary(summary_markdown(manifest))),
    )
    return "\n".join(f"## {heading}\n\n{text.rstrip()}\n" for heading, text in sections)
