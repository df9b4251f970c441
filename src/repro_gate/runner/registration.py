"""Just-in-time runner registrations with GitHub, for a repository or an organisation.

A JIT runner is registered by the service (`POST …/actions/runners/generate-jitconfig`) and
handed only its encoded config, so the runner container never holds a registration token; it
runs one job and GitHub removes it. The service still lists the runners with its name prefix
and deletes what is left (a runner whose container died before taking a job).

Requests go through the project's GitHub client (retries on 5xx, 429 and secondary rate limits,
honouring Retry-After, within a time budget); each call starts a fresh budget. Every answer is
read into typed values (`publish.github.answers`): one that is not what the REST description
says is a GitHubAnswerError, which the slot counts and retries like a refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from repro_gate.errors import GitHubError
from repro_gate.publish.github.answers import Fields, json_object
from repro_gate.publish.github.client import GitHubClient, RetryPolicy
from repro_gate.runner.github_auth import TokenSource, token_source
from repro_gate.runner.runner_config import RunnerConfig
from repro_gate.runner.slots import Slot

FIXED_LABELS = ("self-hosted", "gpu")
SERVICE_LABEL = "repro-gate"
MAX_NAME = 64  # runner names longer than this are refused by the runner's configuration
SLOT_MARK = "-slot"
INDEX_ROOM = 3  # characters kept for the slot index at the end of a runner name
MAX_LABEL = 100


@dataclass(frozen=True)
class JitRunner:
    """A registered runner and the config its container starts with."""

    id: int
    name: str
    labels: tuple[str, ...]
    encoded_jit_config: str


@dataclass(frozen=True)
class RegisteredRunner:
    """A runner as GitHub lists it."""

    id: int
    name: str
    status: str  # online, offline
    busy: bool


def slug(text: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `nvidia-h100-80gb-hbm3`: a label GitHub and YAML accept."""
    lowered = re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-.")
    return lowered[:MAX_LABEL] or "gpu"


def runner_name_stem(prefix: str, host: str) -> str:
    """PREFIX-HOST-slot, how every runner name of the service on this host begins; PREFIX-HOST
    is cut, never the slot index, when the name would pass MAX_NAME."""
    return f"{prefix}-{host}"[:MAX_NAME - len(SLOT_MARK) - INDEX_ROOM] + SLOT_MARK


def runner_name(prefix: str, host: str, slot: Slot) -> str:
    """PREFIX-HOST-slotN: unique per host and slot, so a re-registration replaces the old one."""
    return f"{runner_name_stem(prefix, host)}{slot.index}"


def runner_labels(extra: tuple[str, ...], slot: Slot) -> tuple[str, ...]:
    """self-hosted, gpu, the GPU model, repro-gate, then the configured labels (no repeats)."""
    ordered = [*FIXED_LABELS, slug(slot.model), SERVICE_LABEL, *extra]
    return tuple(dict.fromkeys(ordered))


class Registrar:
    """Registers, lists and deletes the service's runners for one target."""

    def __init__(self, config: RunnerConfig, tokens: TokenSource | None = None,
                 policy: RetryPolicy | None = None) -> None:
        self.config = config
        self.github = config.github
        self.policy = policy
        self.tokens = tokens or token_source(config.github.auth, config.github.api_url, policy)

    def register(self, slot: Slot, work_folder: str | None = None) -> JitRunner:
        """One JIT registration for `slot`; GitHubError (one line) when GitHub refuses.

        `work_folder`: the runner's work folder (the service gives the slot's host path, which
        the runner container sees at the same path); GitHub's default `_work` when None.
        """
        name = runner_name(self.config.name_prefix, self.config.host, slot)
        labels = runner_labels(self.github.labels, slot)
        body: dict[str, Any] = {"name": name, "runner_group_id": self.github.runner_group_id,
                                "labels": list(labels)}
        if work_folder is not None:
            body["work_folder"] = work_folder
        path = self.github.target.api_path("/generate-jitconfig")
        answer = json_object(self._client().request("POST", path, json=body), "POST", path)
        runner = answer.object("runner")
        return JitRunner(runner.integer("id"), runner.text("name"), labels,
                         answer.text("encoded_jit_config"))

    def list_runners(self) -> list[RegisteredRunner]:
        """The target's runners whose name starts with the service's prefix."""
        prefix = self.config.name_prefix + "-"
        found = []
        client = self._client()
        url: str | None = self.github.target.api_path()
        query: dict[str, Any] | None = {"per_page": 100}
        while url:
            # The list is wrapped ({"total_count", "runners"}), so the client's `paginate`
            # (for bare lists) does not apply; the Link header is followed the same way.
            response = client.request("GET", url, params=query)
            found += [_runner(item) for item in
                      json_object(response, "GET", url).objects("runners")]
            url = client.next_page(response, "GET", url)
            query = None
        return [runner for runner in found if runner.name.startswith(prefix)]

    def delete(self, runner_id: int) -> bool:
        """Remove a registration; False when GitHub no longer has it (already gone)."""
        try:
            self._client().request("DELETE", self.github.target.api_path(f"/{runner_id}"))
        except GitHubError as error:
            if error.status == 404:
                return False
            raise
        return True

    def _client(self) -> GitHubClient:
        # A new client per call: a fresh time budget and the token that is valid now.
        return GitHubClient(self.github.api_url, self.tokens.token(), policy=self.policy)


def _runner(item: Fields) -> RegisteredRunner:
    return RegisteredRunner(item.integer("id"), item.text("name"), item.text("status"),
                            item.boolean("busy"))
