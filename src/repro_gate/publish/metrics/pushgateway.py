"""Push a run's SLI metrics to a Prometheus Pushgateway, keeping run counts right.

The Pushgateway replaces a group's values on every push. Each group (job, repository, gate,
runner slot) has one writer at a time, so a push reads the group's counters from the gateway,
adds this run, and PUTs the whole group back. See docs/metrics.md for why the counts stay
right and where they do not.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_client.exposition import (
    basic_auth_handler,
    default_handler,
    push_to_gateway,
    pushadd_to_gateway,
)

from repro_gate import credentials, notices
from repro_gate.config import MetricsConfig
from repro_gate.config.model import DEFAULT_METRICS_TIMEOUT
from repro_gate.errors import PushError, one_line
from repro_gate.manifest.store import MANIFEST_NAME
from repro_gate.publish.deadline import Deadline, DeadlineExceeded
from repro_gate.publish.metrics import sli

PAYLOAD_NAME = "metrics.prom"
LOCAL_REPOSITORY = "local"
NOT_CONFIGURED = "no pushgateway configured"

ATTEMPTS = 3
BACKOFF_SECONDS = (1.0, 2.0)
TIMEOUT_SECONDS = 10.0  # one request's socket timeout; the push as a whole has its deadline
# A new group's zeroed counters must be scraped before the first increment, or `increase()`
# cannot see that increment: wait longer than one 15 s scrape interval. The wait counts against
# the push's deadline (metrics.timeout), which keeps FINAL_EXCHANGE_SECONDS for the read and PUT
# after it (docs/metrics.md).
NEW_GROUP_WAIT_SECONDS = 20.0
FINAL_EXCHANGE_SECONDS = 5.0

ENV_INPUT_URL = "INPUT_PUSHGATEWAY-URL"
ENV_URL = "REPRO_GATE_PUSHGATEWAY_URL"
ENV_USERNAME = credentials.PUSHGATEWAY_USERNAME
ENV_PASSWORD = credentials.PUSHGATEWAY_PASSWORD
ENV_SLOT = "REPRO_GATE_RUNNER_SLOT"
ENV_NEW_GROUP_WAIT = "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT"
ENV_REPOSITORY = "GITHUB_REPOSITORY"

COUNTER_NAMES = (
    sli.RUNS + "_total",
    sli.CHECKPOINT_COMPARISONS + "_total",
    sli.CHECKPOINT_MATCHES + "_total",
    sli.COST_BUDGET_FAILURES + "_total",
    sli.NUMERICS_CHANGED + "_total",
    sli.ATTESTATIONS + "_total",
)


@dataclass(frozen=True)
class Target:
    """Where a gate's metrics go: the gateway, and the group's bounded grouping key."""

    url: str
    job: str
    grouping_key: dict[str, str]
    username: str | None = None
    password: str | None = None
    new_group_wait: float = NEW_GROUP_WAIT_SECONDS

    @property
    def labels(self) -> dict[str, str]:
        """The group's labels as the gateway reports them."""
        return {"job": self.job, **self.grouping_key}

    @property
    def display_url(self) -> str:
        """The gateway URL without any credentials in it."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass
class Outcome:
    """What one push did to the group's counters."""

    counted: bool
    note: str


def push_manifest(
    manifest: dict[str, Any],
    settings: MetricsConfig,
    output_dir: Path,
    environ: Mapping[str, str] | None = None,
    *,
    warn: bool = True,
    manifest_path: Path | None = None,
) -> dict[str, Any]:
    """Push the run's metrics within `settings.timeout` seconds, retries included, and return
    the manifest's `metrics` section.

    Never raises: a failed push keeps the payload in `output_dir`, records the command that
    sends it later (`retry`, naming `manifest_path`, default `output_dir/manifest.json`), and
    prints one warning line unless `warn` is false.
    """
    environ = os.environ if environ is None else environ
    try:
        target = resolve_target(manifest, settings, environ)
    except ValueError as error:
        return {"pushed": False, "reason": str(error)}
    if target is None:
        return {"pushed": False, "reason": NOT_CONFIGURED}
    section: dict[str, Any] = {
        "pushed": False,
        "url": target.display_url,
        "job": target.job,
        "grouping_key": dict(target.grouping_key),
        "attempts": 0,
        "counted": False,
    }
    try:
        payload = keep_payload(manifest, Path(output_dir))
        section["payload"] = str(payload)
    except Exception as error:  # keeping the payload must not stop the push either
        section["payload_error"] = f"could not keep the payload: {one_line(error)}"
    deadline = Deadline(settings.timeout)
    progress = Progress()
    try:
        outcome = deadline.run(
            lambda: push_with_retries(manifest, target, deadline, progress), "metrics push"
        )
    except DeadlineExceeded:
        last = f" (last error: {progress.error})" if progress.error else ""
        section["reason"] = f"no answer within the {settings.timeout:g}s deadline{last}"
    except PushError as error:
        section["reason"] = str(error)
    except Exception as error:  # a push must never change the verdict
        section["reason"] = f"{type(error).__name__}: {one_line(error)}"
    else:
        section.update(pushed=True, counted=outcome.counted, note=outcome.note, pushed_at=_now())
    section["attempts"] = progress.attempts
    if section["pushed"]:
        return section
    section["retry"] = retry_command(manifest_path or Path(output_dir) / MANIFEST_NAME, target)
    if warn:
        notices.warning(failure_line(section))
    return section


def failure_line(section: Mapping[str, Any]) -> str:
    """One line: where the push failed, why, where the payload is, and the command to retry."""
    kept = f"; payload kept in {section['payload']}" if "payload" in section else ""
    return (
        f"metrics push to {section['url']} failed after {section['attempts']} attempt(s): "
        f"{section['reason']}{kept}; send it later with `{section['retry']}`"
    )


def retry_command(manifest_path: Path, target: Target) -> str:
    """The exact command that sends this run's metrics later (credentials stay in the env)."""
    return shlex.join([
        "repro-gate", "push", "--manifest", str(manifest_path.absolute()),
        "--pushgateway-url", target.display_url,
    ])


@dataclass
class Progress:
    """How far a push got; read by the caller when the push ran out of time."""

    attempts: int = 0
    error: str = ""


def push_with_retries(
    manifest: dict[str, Any], target: Target, deadline: Deadline, progress: Progress
) -> Outcome:
    """`push_once` with bounded retries; a backoff that would pass the deadline is not taken."""
    for attempt in range(1, ATTEMPTS + 1):
        progress.attempts = attempt
        try:
            return push_once(manifest, target, deadline)
        except PushError as error:
            progress.error = str(error)
            backoff = BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1]
            if not error.retry or attempt == ATTEMPTS or backoff >= deadline.remaining():
                raise
            time.sleep(backoff)
    raise AssertionError("unreachable: the last attempt returns or raises")


def resolve_target(
    manifest: dict[str, Any], settings: MetricsConfig, environ: Mapping[str, str]
) -> Target | None:
    """The push target from action input, environment, then config; None without a URL."""
    url = (
        environ.get(ENV_INPUT_URL, "").strip()
        or environ.get(ENV_URL, "").strip()
        or (settings.pushgateway_url or "").strip()
    )
    if not url:
        return None
    if "://" not in url:
        url = "http://" + url
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"pushgateway URL {url!r} is not http or https")
    wait_text = environ.get(ENV_NEW_GROUP_WAIT, "").strip()
    try:
        wait = float(wait_text) if wait_text else NEW_GROUP_WAIT_SECONDS
    except ValueError:
        raise ValueError(f"{ENV_NEW_GROUP_WAIT} must be a number of seconds") from None
    slot = settings.slot(environ.get(ENV_SLOT, "").strip())
    return Target(
        url=url.rstrip("/"),
        job=settings.job,
        grouping_key={
            "repository": environ.get(ENV_REPOSITORY, "").strip() or LOCAL_REPOSITORY,
            "gate": str(manifest.get("gate") or "default"),
            "runner_slot": slot,
        },
        username=environ.get(ENV_USERNAME) or None,
        password=environ.get(ENV_PASSWORD) or None,
        new_group_wait=max(wait, 0.0),
    )


def keep_payload(manifest: dict[str, Any], output_dir: Path) -> Path:
    """Write what this run contributes (its gauges and its own increments) to `metrics.prom`."""
    families = sli.counter_families(sli.GroupState(), sli.increments(manifest))
    families += sli.gauge_families(manifest, sli.GroupState())
    path = output_dir / PAYLOAD_NAME
    output_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{PAYLOAD_NAME}.tmp")
    tmp.write_bytes(sli.collect_text(families))
    os.replace(tmp, path)
    return path


def push_once(
    manifest: dict[str, Any], target: Target, deadline: Deadline | None = None
) -> Outcome:
    """Read the group, add this run to its counters, PUT the whole group back."""
    deadline = deadline or Deadline(DEFAULT_METRICS_TIMEOUT)
    previous = read_group(target, deadline)
    short_wait = ""
    if previous is None or _unseeded(previous, sli.increments(manifest)):
        # A new group (or a counter new to it): publish zeroed counters first so the increment
        # is an increase.
        put_group(target, sli.counter_families(previous or sli.GroupState(), None), deadline)
        # The wait fits inside the deadline, leaving time to read and PUT once more.
        wait = min(target.new_group_wait, max(0.0, deadline.remaining() - FINAL_EXCHANGE_SECONDS))
        if wait < target.new_group_wait:
            short_wait = f"; new group: waited {wait:.3g}s of {target.new_group_wait:g}s"
        time.sleep(wait)
        previous = read_group(target, deadline) or sli.GroupState()
    finished = sli.run_timestamp(manifest)
    last_run = previous.get(sli.LAST_RUN) if previous.has(sli.LAST_RUN) else None
    if finished is not None and last_run is not None and finished == last_run:
        # This run is already in the counters (a retry after a lost response, or a re-send).
        counters = sli.counter_families(previous, None)
        put_group(target, counters + sli.gauge_families(manifest, previous), deadline)
        return Outcome(counted=True, note="this run was already counted")
    counters = sli.counter_families(previous, sli.increments(manifest))
    if finished is not None and last_run is not None and finished < last_run:
        # A late push of an older run: count it, but keep the newer run's gauges.
        put_group(target, counters + sli.carried_gauges(previous, COUNTER_NAMES), deadline)
        return Outcome(counted=True, note="late push: counted, newer gauges kept" + short_wait)
    put_group(target, counters + sli.gauge_families(manifest, previous), deadline)
    return Outcome(counted=True, note="counted" + short_wait)


def _unseeded(previous: sli.GroupState, added: sli.Increments) -> bool:
    """Whether a counter this run increments has never been at 0 in the group: a new group, or
    the budget or numerics counter in a group older than it."""
    budget = sli.COST_BUDGET_FAILURES + "_total"
    numerics = sli.NUMERICS_CHANGED + "_total"
    return not previous.has(sli.RUNS + "_total") or (
        added.cost_budget_failures > 0 and not previous.has(budget)
    ) or (any(added.numerics_changed.values()) and not previous.has(numerics))


def read_group(target: Target, deadline: Deadline) -> sli.GroupState | None:
    """The group's current series from `GET /api/v1/metrics`; None when the group is absent."""
    auth = (target.username, target.password or "") if target.username else None
    timeout = _request_timeout(deadline)
    try:
        response = requests.get(target.url + "/api/v1/metrics", auth=auth, timeout=timeout)
    except requests.RequestException as error:
        raise PushError(f"cannot read the gateway: {_reason(error)}") from None
    if response.status_code != 200:
        raise PushError(
            f"reading the gateway answered HTTP {response.status_code}",
            retry=response.status_code >= 500,
        )
    try:
        groups = response.json()["data"]
    except (ValueError, KeyError, TypeError):
        raise PushError("the gateway's /api/v1/metrics is not a Pushgateway answer") from None
    wanted = target.labels
    for group in groups:
        if group.get("labels") == wanted:
            return _group_state(group, set(wanted) | {"instance"})
    return None


def put_group(target: Target, families: list[Any], deadline: Deadline) -> None:
    """Replace the whole group with `families` (HTTP PUT)."""
    _send(push_to_gateway, target, families, deadline)


def post_families(target: Target, families: list[Any], deadline: Deadline) -> None:
    """Replace only the metrics of `families` in the group, the others kept (HTTP POST)."""
    _send(pushadd_to_gateway, target, families, deadline)


def _send(send: Callable[..., None], target: Target, families: list[Any], deadline: Deadline
          ) -> None:
    timeout = _request_timeout(deadline)
    handler: Callable[..., Callable[[], None]] = default_handler
    if target.username:
        username, password = target.username, target.password or ""

        def handler(url: str, method: str, timeout: float | None, headers: Any, data: bytes
                    ) -> Callable[[], None]:
            return basic_auth_handler(url, method, timeout, headers, data, username, password)

    try:
        send(
            target.url,
            job=target.job,
            registry=sli.registry(families),
            grouping_key=target.grouping_key,
            timeout=timeout,
            handler=handler,
        )
    except OSError as error:
        code = getattr(error, "code", None)
        retry = code is None or code >= 500
        raise PushError(f"push rejected: {_reason(error)}", retry=retry) from None


def _request_timeout(deadline: Deadline) -> float:
    """The socket timeout of the next request: what is left of the deadline, at most 10 s."""
    if deadline.expired():
        raise PushError("the deadline was reached before the gateway answered", retry=False)
    return min(TIMEOUT_SECONDS, deadline.remaining())


def _group_state(group: dict[str, Any], grouping_labels: set[str]) -> sli.GroupState:
    state = sli.GroupState()
    for name, family in group.items():
        if not isinstance(family, dict) or "metrics" not in family:
            continue
        state.helps[name] = str(family.get("help", ""))
        for metric in family["metrics"]:
            labels = {
                k: v for k, v in (metric.get("labels") or {}).items() if k not in grouping_labels
            }
            try:
                value = float(metric.get("value"))
            except (TypeError, ValueError):
                continue
            state.values[sli.series_key(name, labels)] = value
    return state


def _reason(error: BaseException) -> str:
    """urllib's errors keep the cause in `reason` (an exception or a string)."""
    return one_line(getattr(error, "reason", None) or error)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
