"""The keys of reporting (GitHub, the Pushgateway) and of the output directory."""

from __future__ import annotations

from typing import get_args

from repro_gate.config.keys.base import REPORTING, ConfigKey, Kind
from repro_gate.config.model import ErrorConclusion, ReportStatus

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("report.enabled", Kind.BOOLEAN,
              "report to GitHub when running in Actions (default on)", ("--report",),
              dest="report_enabled", group=REPORTING,
              doc="GitHub reporting"),
    ConfigKey("report.check_run", Kind.BOOLEAN,
              shares_row=True),
    ConfigKey("report.status", Kind.CHOICE,
              "commit status: only when a check run can't be written (default), always, or never",
              ("--report-status",), group=REPORTING, choices=get_args(ReportStatus),
              shares_row=True),
    ConfigKey("report.comment", Kind.BOOLEAN, "sticky pull-request comment (default on)",
              ("--comment",), group=REPORTING,
              shares_row=True),
    ConfigKey("report.error_conclusion", Kind.CHOICE,
              "check-run conclusion for the verdict error (default {default})",
              ("--error-conclusion",), group=REPORTING, choices=get_args(ErrorConclusion),
              shares_row=True),
    ConfigKey("report.timeout", Kind.NUMBER,
              "deadline of each GitHub reporting phase, retries included (default {default:g})",
              ("--report-timeout",), group=REPORTING, metavar="SECONDS",
              doc_default="{default:g} (s per phase)",
              shares_row=True),
    ConfigKey("metrics.pushgateway_url", Kind.TEXT, "Pushgateway for SLI metrics",
              ("--pushgateway-url",), group=REPORTING, metavar="URL",
              action_input="pushgateway-url",
              doc="Pushgateway metrics ([docs/metrics.md](docs/metrics.md))",
              input_description="Prometheus Pushgateway for the reproducibility SLI metrics.",
              input_doc="Prometheus Pushgateway for the reproducibility SLI."),
    ConfigKey("metrics.job", Kind.TEXT, "Pushgateway job label", ("--metrics-job",),
              group=REPORTING, metavar="JOB",
              shares_row=True),
    ConfigKey("metrics.runner_slot", Kind.TEXT, "runner slot label (bounded)", ("--runner-slot",),
              group=REPORTING, metavar="SLOT", action_input="runner-slot",
              doc_default="`default`",
              shares_row=True,
              input_description="Metrics group of this runner (one job at a time per slot keeps"
                                " run counts exact), e.g. gpu-0.",
              input_doc="Metrics group of this runner; one job at a time per slot keeps run"
                        " counts exact (see [metrics.md](metrics.md))."),
    ConfigKey("metrics.timeout", Kind.NUMBER,
              "deadline of one Pushgateway push, retries included (default {default:g})",
              ("--metrics-timeout",), group=REPORTING, metavar="SECONDS",
              doc_default="{default:g} (s per push)",
              shares_row=True),
    ConfigKey("output_dir", Kind.TEXT, "where the manifest and runs go (default {default})",
              ("-o", "--output-dir"), action_input="output-dir",
              doc="manifest, run directories and logs",
              input_description="Where the manifest and the run directories go (default"
                                " repro-gate-out).",
              input_doc="Where the manifest and runs go (default `repro-gate-out`)."),
)
