"""`repro-gate push`: send a finished run's metrics to the Pushgateway, later or again."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from repro_gate import manifest
from repro_gate.config import MetricsConfig, recorded_section
from repro_gate.errors import EXIT_FAIL, EXIT_PASS, ErrorKind, GateError
from repro_gate.publish.metrics import push_manifest
from repro_gate.publish.metrics.push import ENV_INPUT_URL, ENV_URL, NOT_CONFIGURED


def add_parser(subparsers: Any, name: str) -> None:
    """Register `repro-gate push`."""
    parser = subparsers.add_parser(
        name,
        help="push a run's SLI metrics to a Prometheus Pushgateway",
        description=(
            "Push the SLI metrics of a finished run (its manifest) to the Pushgateway, adding the"
            " run to its group's counters once. The URL comes from INPUT_PUSHGATEWAY-URL,"
            " REPRO_GATE_PUSHGATEWAY_URL, --url or the manifest's metrics.pushgateway_url."
            " Exit 0: sent; 1: the push failed; 2: bad input."
        ),
    )
    parser.add_argument("--manifest", required=True, type=Path, help="manifest.json of the run")
    parser.add_argument("--url", help="Pushgateway URL (overrides the configured one)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="push even when the manifest says its metrics were already pushed",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Push the manifest's metrics; record the outcome in the manifest's `metrics` section."""
    path: Path = args.manifest
    document = manifest.read(path)
    previous = document.get("metrics") or {}
    if previous.get("pushed") and previous.get("counted") and not args.force:
        print(f"repro-gate: metrics of {path} were already pushed; nothing to do")
        return EXIT_PASS
    settings = MetricsConfig(**recorded_section(document.get("config"), "metrics", str(path)))
    environ = dict(os.environ)
    if args.url:
        # An explicit --url wins over the environment and the configuration.
        environ.pop(ENV_INPUT_URL, None)
        environ[ENV_URL] = args.url
    section = push_manifest(document, settings, path.parent, environ)
    if section.get("reason") == NOT_CONFIGURED:
        raise GateError(
            "no pushgateway configured: pass --url or set REPRO_GATE_PUSHGATEWAY_URL",
            kind=ErrorKind.METRICS_CONFIG,
        )
    if not section.get("pushed"):
        if "url" not in section:
            raise GateError(f"cannot push metrics: {section.get('reason')}",
                            kind=ErrorKind.METRICS_CONFIG)
        return EXIT_FAIL
    document["metrics"] = section
    try:
        manifest.update(path, document)
    except (GateError, OSError) as error:
        print(f"repro-gate: warning: pushed, but could not update {path}: {error}", file=sys.stderr)
    print(f"repro-gate: metrics pushed to {section['url']} ({section['note']})")
    return EXIT_PASS
