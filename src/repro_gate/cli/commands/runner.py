"""`repro-gate runner`: the self-hosted GPU runner service.

`serve` is the long-running service: one ephemeral just-in-time runner per GPU slot, kept
registered, health-checked and cleaned between jobs, drained on SIGTERM (runner/service.py).
`check-config` validates runner.yml and prints the slots and the registration target;
`register-once` does one just-in-time registration for one slot (a manual check of the
credentials). `setup` prepares the host for the slots' rootless engines (users, subordinate
IDs, folders, device access); `slot-endpoint` brings up exactly what a job on one slot gets,
without GitHub, until SIGTERM; `reset-slot` empties a slot's engine as the service does
between jobs (through the process holding the slot, or bringing the slot up itself).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from repro_gate.errors import EXIT_FAIL, ConfigError, ErrorKind, GateError, PublishError
from repro_gate.runner.github_auth import AppInstallationToken
from repro_gate.runner.registration import Registrar, runner_labels, runner_name
from repro_gate.runner.runner_config import (
    AppAuth,
    EngineKind,
    RunnerConfig,
    load_runner_config,
)
from repro_gate.runner.slot_identity import SlotIdentity
from repro_gate.runner.slots import Slot, discover

TOKEN_ON_COMMAND_LINE = (
    "--token: a token is never taken on the command line (ps and shell history show it):"
    " put it in a file named by github.auth.token_file in runner.yml, or use github.auth.app")


def add_parser(subparsers: Any, name: str) -> None:
    """Register `runner` and its subcommands."""
    parser = subparsers.add_parser(
        name,
        help="the self-hosted GPU runner service (serve, setup, slot-endpoint, reset-slot,"
        " audit, check-config, register-once)",
        description="One ephemeral just-in-time GitHub Actions runner per GPU slot."
        " serve runs the service until SIGTERM/SIGINT drains it; check-config validates"
        " runner.yml; register-once registers one slot's runner.",
    )
    actions = parser.add_subparsers(dest="runner_action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve", help="keep one ephemeral runner per GPU slot registered (until SIGTERM)",
        description="Start-up checks (config, Docker daemon, runner image), orphan clean-up,"
        " then per slot: health check, JIT registration, runner container, cleanup, again."
        " SIGTERM/SIGINT drain: idle runners are deregistered, busy jobs get"
        " drain_timeout_seconds; exit 0.")
    _common(serve)
    check = actions.add_parser("check-config", help="validate runner.yml, print slots and target")
    _common(check)
    register = actions.add_parser("register-once",
                                  help="register one slot's JIT runner and print its name")
    _common(register)
    _slot_option(register)
    register.add_argument("--jit-config-file", type=Path,
                          help="write the runner's encoded JIT config here (mode 0600)")
    setup = actions.add_parser(
        "setup", help="prepare this host for the slots (users, IDs, folders, devices); as root",
        description="Idempotent: creates each slot's user and subordinate IDs, its folders and"
        " its GPU node's group, and makes /dev/net/tun usable; prints every change.")
    _common(setup)
    endpoint = actions.add_parser(
        "slot-endpoint", help="bring up what a job on one slot gets, until SIGTERM",
        description="The slot's engine (under the slot's user) and its filter, without GitHub;"
        " prints DOCKER_HOST=unix://<socket> once ready; SIGTERM/SIGINT removes what it"
        " started.")
    _common(endpoint)
    _slot_option(endpoint)
    reset = actions.add_parser(
        "reset-slot", help="empty a slot's engine as between two jobs; exit 1 if anything"
        " survived",
        description="Asks the process holding slot N (serve or slot-endpoint) to reset it, or"
        " brings the slot up itself: the engine is killed, everything but the runner image and"
        " images pinned by digest removed whatever its labels, the engine started again and"
        " checked. Exit 0 fresh and empty, 1 naming what survived, 2 error.")
    _common(reset)
    _slot_option(reset)
    audit = actions.add_parser(
        "audit", help="try the known escapes against a live slot; exit 1 if anything got out",
        description="Brings up slot N's endpoint (and another slot's, for its canaries), runs"
        " the project's escape attempts through it with canaries on the host and in the other"
        " slot, prints a table; exit 0 nothing escaped, 1 something did, 2 error.")
    _common(audit)
    _slot_option(audit)


def run(args: argparse.Namespace) -> int:
    """The runner action named on the command line."""
    actions = {"serve": run_serve, "check-config": run_check_config,
               "register-once": run_register_once, "setup": run_setup,
               "slot-endpoint": run_slot_endpoint, "reset-slot": run_reset_slot,
               "audit": run_audit_command}
    return actions[args.runner_action](args)


def _slot_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slot", type=int, required=True, help="slot index (check-config)")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the runner.yml file")
    # Refused with a pointer to the right place, rather than argparse's "unrecognized".
    parser.add_argument("--token", help=argparse.SUPPRESS)


def load(args: argparse.Namespace) -> tuple[RunnerConfig, list[Slot]]:
    """The configuration and this machine's slots; ConfigError (exit 2) on any problem."""
    if args.token is not None:
        raise ConfigError(TOKEN_ON_COMMAND_LINE)
    effective = load_runner_config(args.config)
    return effective, discover(effective.slots)


def run_serve(args: argparse.Namespace) -> int:
    """The service; 0 after a drain, 2 (one line) when it cannot start."""
    from repro_gate.runner.service import serve  # docker and prometheus only for `serve`

    effective, slots = load(args)
    return serve(effective, slots)


def run_setup(args: argparse.Namespace) -> int:
    """Prepare the host; 0 (changes printed, or "nothing to change"), 2 on what it cannot do."""
    from repro_gate.runner.host_setup import set_up

    effective, slots = load(args)
    set_up(effective, slots, print)
    return 0


def run_slot_endpoint(args: argparse.Namespace) -> int:
    """The slot's endpoint in the foreground; its first line is DOCKER_HOST=…; 0 after SIGTERM."""
    from repro_gate.runner.slot_endpoint import SlotEndpoint

    effective, slots = load(args)
    slot = _slot(slots, args.slot)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with SlotEndpoint(effective, slot, lambda line: print(line, file=sys.stderr)) as endpoint:
            print(f"DOCKER_HOST=unix://{endpoint.socket}", flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def run_reset_slot(args: argparse.Namespace) -> int:
    """Reset slot N; 0 fresh and empty, 1 (naming what survived) otherwise."""
    from repro_gate.runner.slot_control import Answer, ask_reset, control_socket
    from repro_gate.runner.slot_endpoint import SlotEndpoint

    effective, slots = load(args)
    slot = _slot(slots, args.slot)
    if effective.isolation.engine is EngineKind.SHARED:
        raise ConfigError(f"{effective.config_file}: isolation.engine shared: the host's daemon"
                          " is not reset between jobs (only a slot's own engine is)")
    answer = ask_reset(control_socket(effective.work_root, slot))
    if answer is None:  # no process holds the slot: bring it up, reset it, stop it
        with SlotEndpoint(effective, slot, lambda line: print(line, file=sys.stderr)) as endpoint:
            report = endpoint.reset()
        survivors = ", ".join(report.survivors)
    elif answer.answer is Answer.ERROR:
        raise GateError(f"slot {slot.index}: the reset failed: {answer.detail}",
                        kind=ErrorKind.DOCKER)
    else:
        survivors = answer.detail if answer.answer is Answer.SURVIVED else ""
    if survivors:
        print(f"slot {slot.index}: survived the reset: {survivors}")
        return EXIT_FAIL
    print(f"slot {slot.index}: fresh: its engine answers and holds nothing of earlier jobs")
    return 0


def run_audit_command(args: argparse.Namespace) -> int:
    """The escape attempts against slot N's live endpoint; 1 if anything got out."""
    from repro_gate.runner.audit_session import audit_slot

    effective, slots = load(args)
    report = audit_slot(effective, slots, _slot(slots, args.slot),
                        lambda line: print(line, file=sys.stderr))
    print(report.render())
    return EXIT_FAIL if report.escaped else 0


def _slot(slots: list[Slot], index: int) -> Slot:
    if not 0 <= index < len(slots):
        raise ConfigError(f"--slot {index}: this machine has slots 0 to {len(slots) - 1}")
    return slots[index]


def run_check_config(args: argparse.Namespace) -> int:
    """Print what the service would register; exit 0, or 2 on a bad configuration."""
    effective, slots = load(args)
    github = effective.github
    if isinstance(github.auth, AppAuth):
        # Sign one JWT now: a wrong key file is found here, not at the first registration.
        AppInstallationToken(github.auth, github.api_url).app_jwt()
    print(f"config: {effective.config_file}")
    print(f"target: {github.target.describe()} at {github.api_url},"
          f" runner group {github.runner_group_id}, auth: {_auth(effective)}")
    print(f"work root: {effective.work_root}")
    print(f"isolation: {_isolation(effective)}")
    for slot in slots:
        parent = f" (MIG on {slot.parent_uuid})" if slot.parent_uuid else ""
        print(f"slot {slot.index}: {slot.uuid} {slot.model}{parent}"
              f" -> {runner_name(effective.name_prefix, effective.host, slot)}"
              f" [{', '.join(runner_labels(github.labels, slot))}]{_slot_user(effective, slot)}")
    return 0


def run_register_once(args: argparse.Namespace) -> int:
    """One JIT registration; prints the runner's name and id."""
    effective, slots = load(args)
    slot = _slot(slots, args.slot)
    try:
        runner = Registrar(effective).register(slot)
    except PublishError as error:
        # 401/403/404 are credentials or a target without the permission; the rest is GitHub.
        raise GateError(f"registration failed: {error}", kind=ErrorKind.CONFIG) from None
    if args.jit_config_file is not None:
        _write_private(args.jit_config_file, runner.encoded_jit_config)
    print(f"{runner.name} (id {runner.id})")
    return 0


def _slot_user(effective: RunnerConfig, slot: Slot) -> str:
    if effective.isolation.engine is EngineKind.SHARED:
        return ""
    identity = SlotIdentity.of(effective, slot)
    return (f", user {identity.user}, subordinate IDs {identity.subordinate_first}-"
            f"{identity.subordinate_last}")


def _isolation(effective: RunnerConfig) -> str:
    if effective.isolation.engine is EngineKind.SHARED:
        return (f"shared engine {effective.docker_url}, behind the filter only"
                " (no kernel boundary)")
    return "a rootless engine per slot, under the slot's own user"


def _auth(effective: RunnerConfig) -> str:
    auth = effective.github.auth
    if isinstance(auth, AppAuth):
        return f"GitHub App {auth.app_id}, installation {auth.installation_id}"
    return f"token file {auth.token_file}"


def _write_private(path: Path, text: str) -> None:
    """The JIT config holds the runner's credentials: only its owner may read it."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        raise ConfigError(f"--jit-config-file {path}: {error.strerror}") from None
