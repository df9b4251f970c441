"""Push a run's SLI metrics to a Prometheus Pushgateway, keeping run counts right.

The Pushgateway replaces a group's values on every push. Each group (job, repository, gate,
runner slot) has one writer at a time, so a push reads the group's counters from the gateway,
adds this run, and PUTs the whole group back. See docs/metrics.md for why the counts stay
right and where they do not.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_client.exposition import basic_auth_handler, default_handler, push_to_gateway

from repro_gate.config import MetricsConfig
from repro_gate.errors import PushError, one_line
from repro_gate.manifest.store import MANIFEST_NAME
from repro_gate.publish.metrics import sli

PAYLOAD_NAME = "metrics.prom"
DEFAULT_SLOT = "default"
LOCAL_REPOSITORY = "local"
NOT_CONFIGURED = "no pushgateway configured"

ATTEMPTS = 3
BACKOFF_SECONDS = (1.0, 2.0)
TIMEOUT_SECONDS = 10.0
# A new group's zeroed counters must be scraped before the first increment, or `increase()`
# cannot see that increment: wait about two scrape intervals.
NEW_GROUP_WAIT_SECONDS = 30.0

ENV_INPUT_URL = "INPUT_PUSHGATEWAY-URL"
ENV_URL = "REPRO_GATE_PUSHGATEWAY_URL"
ENV_USERNAME = "REPRO_GATE_PUSHGATEWAY_USERNAME"
ENV_PASSWORD = "REPRO_GATE_PUSHGATEWAY_PASSWORD"
ENV_SLOT = "REPRO_GATE_RUNNER_SLOT"
ENV_NEW_GROUP_WAIT = "REPRO_GATE_PUSHGATEWAY_NEW_GROUP_WAIT"
ENV_REPOSITORY = "GITHUB_REPOSITORY"

COUNTER_NAMES = (
    sli.RUNS + "_total",
    sli.CHECKPOINT_COMPARISONS + "_total",
    sli.CHECKPOINT_MATCHES + "_total",
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
) -> dict[str, Any]:
    """Push the run's metrics (bounded retries) and return the manifest's `metrics` section.

    Never raises: a failed push prints one warning line and keeps the payload in `output_dir`.
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
    error_text = ""
    for attempt in range(1, ATTEMPTS + 1):
        section["attempts"] = attempt
        try:
            outcome = push_once(manifest, target)
        except PushError as error:
            error_text = str(error)
            if not error.retry or attempt == ATTEMPTS:
                break
            time.sleep(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1])
            continue
        except Exception as error:  # a push must never change the verdict
            error_text = f"{type(error).__name__}: {one_line(error)}"
            break
        section.update(pushed=True, counted=outcome.counted, note=outcome.note, pushed_at=_now())
        return section
    section["reason"] = error_text
    kept = f"; payload kept in {section['payload']}" if "payload" in section else ""
    print(
        f"repro-gate: warning: metrics push to {target.display_url} failed after "
        f"{section['attempts']} attempt(s): {error_text}{kept}; send it later with "
        f"`repro-gate push --manifest {Path(output_dir) / MANIFEST_NAME}`",
        file=sys.stderr,
    )
    return section


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
    slot = settings.runner_slot or environ.get(ENV_SLOT, "").strip() or DEFAULT_SLOT
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


def push_once(manifest: dict[str, Any], target: Target) -> Outcome:
    """Read the group, add this run to its counters, PUT the whole group back."""
    previous = read_group(target)
    if previous is None or not previous.has(sli.RUNS + "_total"):
        # A new group: publish zeroed counters first so the increment is an increase.
        put_group(target, sli.counter_families(previous or sli.GroupState(), None))
        time.sleep(target.new_group_wait)
        previous = read_group(target) or sli.GroupState()
    finished = sli.run_timestamp(manifest)
    last_run = previous.get(sli.LAST_RUN) if previous.has(sli.LAST_RUN) else None
    if finished is not None and last_run is not None and finished == last_run:
        # This run is already in the counters (a retry after a lost response, or a re-send).
        counters = sli.counter_families(previous, None)
        put_group(target, counters + sli.gauge_families(manifest, previous))
        return Outcome(counted=True, note="this run was already counted")
    counters = sli.counter_families(previous, sli.increments(manifest))
    if finished is not None and last_run is not None and finished < last_run:
        # A late push of an older run: count it, but keep the newer run's gauges.
        put_group(target, counters + sli.carried_gauges(previous, COUNTER_NAMES))
        return Outcome(counted=True, note="late push: counted, newer gauges kept")
    put_group(target, counters + sli.gauge_families(manifest, previous))
    return Outcome(counted=True, note="counted")


def read_group(target: Target) -> sli.GroupState | None:
    """The group's current series from `GET /api/v1/metrics`; None when the group is absent."""
    auth = (target.username, target.password or "") if target.username else None
    try:
        response = requests.get(target.url + "/api/v1/metrics", auth=auth, timeout=TIMEOUT_SECONDS)
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


def put_group(target: Target, families: list[Any]) -> None:
    """Replace the whole group with `families` (HTTP PUT)."""
    handler: Callable[..., Callable[[], None]] = default_handler
    if target.username:
        username, password = target.username, target.password or ""

        def handler(url: str, method: str, timeout: float | None, headers: Any, data: bytes):
            return basic_auth_handler(url, method, timeout, headers, data, username, password)

    try:
        push_to_gateway(
            target.url,
            job=target.job,
            registry=sli.registry(families),
            grouping_key=target.grouping_key,
            timeout=TIMEOUT_SECONDS,
            handler=handler,
        )
    except OSError as error:
        code = getattr(error, "code", None)
        retry = code is None or code >= 500
        raise PushError(f"push rejected: {_reason(error)}", retry=retry) from None


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
