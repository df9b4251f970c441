"""`repro-gate push`: send a finished run's metrics to the Pushgateway, later or again."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import Any

from repro_gate import manifest
from repro_gate.config import MetricsConfig, recorded_section
from repro_gate.errors import EXIT_ERROR, EXIT_PASS, ErrorKind, GateError
from repro_gate.publish.metrics import push_manifest
from repro_gate.publish.metrics.pushgateway import (
    ENV_INPUT_URL,
    ENV_URL,
    NOT_CONFIGURED,
    failure_line,
)


def add_parser(subparsers: Any, name: str) -> None:
    """Register `repro-gate push`."""
    parser = subparsers.add_parser(
        name,
        help="push a run's SLI metrics to a Prometheus Pushgateway",
        description=(
            "Push the SLI metrics of a finished run (its manifest) to the Pushgateway, adding the"
            " run to its group's counters once. The URL is --pushgateway-url, else"
            " INPUT_PUSHGATEWAY-URL, REPRO_GATE_PUSHGATEWAY_URL or the manifest's"
            " metrics.pushgateway_url. The push, retries included, ends after --metrics-timeout"
            " seconds (default: the manifest's metrics.timeout). Exit 0: pushed; 2: any error,"
            " a failed push included (its line ends with the command to retry)."
        ),
    )
    parser.add_argument("--manifest", required=True, type=Path, help="manifest.json of the run")
    parser.add_argument("--pushgateway-url", dest="url", metavar="URL",
                        help="Pushgateway URL (overrides the configured one)")
    # The flag's name before it matched `check --pushgateway-url`; kept for existing scripts.
    parser.add_argument("--url", dest="url", help=argparse.SUPPRESS)
    parser.add_argument("--metrics-timeout", type=float, metavar="SECONDS",
                        help="deadline of the push, retries included")
    parser.add_argument(
        "--force",
        action="store_true",
        help="push even when the manifest says its metrics were already pushed",
    )


def run(args: argparse.Namespace) -> int:
    """`repro-gate push`: its flags as `push`'s parameters."""
    return push(args.manifest, url=args.url, timeout=args.metrics_timeout, force=args.force)


def push(
    path: Path, *, url: str | None = None, timeout: float | None = None,
    force: bool = False,
) -> int:
    """Push the manifest's metrics; record the outcome in the manifest's `metrics` section."""
    document = manifest.read(path)
    previous = document.get("metrics") or {}
    if previous.get("pushed") and previous.get("counted") and not force:
        print(f"repro-gate: metrics of {path} were already pushed; nothing to do")
        return EXIT_PASS
    settings = MetricsConfig(**recorded_section(document.get("config"), "metrics", str(path)))
    if timeout is not None:
        if not (math.isfinite(timeout) and timeout > 0):
            raise GateError(f"--metrics-timeout: must be a finite number > 0, got "
                            f"{timeout}", kind=ErrorKind.METRICS_CONFIG)
        settings = dataclasses.replace(settings, timeout=timeout)
    environ = dict(os.environ)
    if url:
        # An explicit --pushgateway-url wins over the environment and the configuration.
        environ.pop(ENV_INPUT_URL, None)
        environ[ENV_URL] = url
    section = push_manifest(document, settings, path.parent, environ, warn=False,
                            manifest_path=path)
    if section.get("reason") == NOT_CONFIGURED:
        raise GateError(
            "no pushgateway configured: pass --pushgateway-url or set REPRO_GATE_PUSHGATEWAY_URL",
            kind=ErrorKind.METRICS_CONFIG,
        )
    if not section.get("pushed"):
        if "url" not in section:
            raise GateError(f"cannot push metrics: {section.get('reason')}",
                            kind=ErrorKind.METRICS_CONFIG)
        # Exit 1 is a verdict (fail); a push that did not happen is an error like any other.
        print(f"repro-gate: error: {failure_line(section)}", file=sys.stderr)
        return EXIT_ERROR
    document["metrics"] = section
    try:
        manifest.update(path, document)
    except (GateError, OSError) as error:
        print(f"repro-gate: warning: pushed, but could not update {path}: {error}", file=sys.stderr)
    print(f"repro-gate: metrics pushed to {section['url']} ({section['note']})")
    return EXIT_PASS
