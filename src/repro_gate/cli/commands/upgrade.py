"""`repro-gate upgrade`: does upgrading the lockfile change the training's numerics, is it still
reproducible, and which package did it.

The baseline is the current lock (uv.lock or a pinned requirements.txt); the candidate is
computed by uv (--upgrade, --upgrade-package) or given (--candidate-lock). Both run the ordinary
gate in environments built from the locks, each package from the source its lock records; when
their numerics differ, a search over the changed packages names the culprit. The report is
written to <output_dir>/upgrade.json.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate import config, publish
from repro_gate.cli.flags import add_config_options, add_key_flags
from repro_gate.cli.session import PLAIN, Output, Session, shown_path, warn_on_stderr
from repro_gate.cli.sinks import stderr_sink_for
from repro_gate.config import DEFAULT_OUTPUT_DIR, overrides
from repro_gate.config.keys import Scope
from repro_gate.config.model import UpgradeConfig
from repro_gate.errors import ConfigError, GateError
from repro_gate.launch import launcher_for
from repro_gate.render import upgrade_console
from repro_gate.upgrade import UpgradeRequest
from repro_gate.upgrade.check import (
    CandidateSource,
    SilentPublisher,
    UpgradeOptions,
    UpgradeOutcome,
    configuration_error,
    run_upgrade,
)

EPILOG = f"""\
exit codes: 0 same (numerics equal or within tolerance, and reproducible), 1 changed or not
reproducible, 2 error (bad input, a lock that does not resolve, an environment that cannot be
built, a run that fails; what was written before stays), 3 refused (a fork's pull request on a
self-hosted runner: docs/action.md#pull-requests-from-forks).
examples:
  repro-gate upgrade --upgrade -- python train.py
  repro-gate upgrade --upgrade-package torch --upgrade-package numpy -- python train.py
  repro-gate upgrade --candidate-lock pr/uv.lock --command 'python train.py'
environments are cached in {UpgradeConfig.cache_dir} (upgrade.cache_dir, --env-cache).
"""


def add_parser(subparsers: Any, name: str) -> None:
    """Register `upgrade` and its options (every `check` option applies to both gates)."""
    parser = subparsers.add_parser(
        name,
        help="compare the training under the current lock and an upgraded one; name the culprit",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    candidate = parser.add_argument_group("the candidate lock (one of)")
    candidate.add_argument("--upgrade", action="store_true",
                           help="upgrade every package (uv lock --upgrade / uv pip compile"
                                " --upgrade)")
    candidate.add_argument("--upgrade-package", action="append", metavar="NAME",
                           help="upgrade only this package (repeatable)")
    candidate.add_argument("--candidate-lock", metavar="PATH",
                           help="the candidate lock as a file (e.g. a Dependabot pull request's)")
    upgrade = parser.add_argument_group("upgrade check")
    add_key_flags(parser, Scope.UPGRADE, upgrade)
    upgrade.add_argument("--write-lock", action="store_true",
                         help="copy the candidate lock over the project's lock (not on error)")
    add_config_options(parser)
    parser.add_argument("--json", action="store_true", help="print upgrade.json on stdout")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not stream the runs' output (it is still logged to files)")
    parser.add_argument("trailing_command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="training command as separate words, run without a shell")


def run(args: argparse.Namespace) -> int:
    """`repro-gate upgrade`: its flags as `upgrade`'s parameters (the one place that reads
    them)."""
    output = Output(as_json=args.json, quiet=args.quiet, wait=args.wait)
    with session(args.output_dir, output).recording():
        options = upgrade_options(args)
        flag_overrides = overrides.from_flags(args)
    return upgrade(Path(args.config) if args.config else None, flag_overrides, options, output)


def upgrade(
    config_path: Path | None,
    flag_overrides: Mapping[str, Any],
    options: UpgradeOptions,
    output: Output = PLAIN,
) -> int:
    """Load the config, run the upgrade check, print the report; returns its exit code."""
    upgrade_session = session(flag_overrides.get("output_dir"), output)
    effective = upgrade_session.configure(
        lambda: config.load(config_path, dict(flag_overrides), Path.cwd()))
    return upgrade_session.run(
        effective,
        lambda sinks: run_upgrade(effective, options, launcher_for,
                                  publish.for_upgrade(effective), sinks),
        lambda outcome: _render(outcome, output.as_json),
    )


def session(output_dir: str | None, output: Output) -> Session:
    """The lifecycle of an upgrade check from the command line: warnings and runs' output on
    stderr, an error record (upgrade.json) when nothing ran."""
    def record(error: GateError) -> None:
        directory = Path(output_dir or DEFAULT_OUTPUT_DIR).absolute()
        configuration_error(error, Path.cwd(), directory, SilentPublisher())

    return Session(warn=warn_on_stderr, record_error=record,
                   sinks=stderr_sink_for(output.quiet), wait=output.wait)


def _render(outcome: UpgradeOutcome, as_json: bool) -> str:
    if as_json:
        return json.dumps(outcome.document, indent=2)
    return upgrade_console.render(outcome.document, shown_path(outcome.path))


def upgrade_options(args: argparse.Namespace) -> UpgradeOptions:
    """What to compare, from the flags; a ConfigError when it is unclear."""
    given = args.candidate_lock is not None
    computed = args.upgrade or bool(args.upgrade_package)
    if given and computed:
        raise ConfigError("--candidate-lock gives the candidate; --upgrade and"
                          " --upgrade-package compute one: use one of them")
    if args.upgrade and args.upgrade_package:
        raise ConfigError("--upgrade upgrades every package: leave out --upgrade-package")
    if not given and not computed:
        raise ConfigError("nothing to compare: give --upgrade, --upgrade-package NAME or"
                          " --candidate-lock PATH")
    if given:
        source = CandidateSource(lock=Path(args.candidate_lock).absolute())
    else:
        source = CandidateSource(request=UpgradeRequest(tuple(args.upgrade_package or ())))
    return UpgradeOptions(source, write_lock=args.write_lock)
