"""A slot's rootless engine without starting one: the launcher found or named in one line, the
socket paths it needs checked against the kernel's limit, and how it would be started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.runner_files import token_file, write_config

from repro_gate.errors import ConfigError
from repro_gate.runner.runner_config import RunnerConfig, load_runner_config
from repro_gate.runner.slot_engine import SlotEngine, check_socket_paths, launcher
from repro_gate.runner.slot_folders import Owner, SlotFolders


def config(folder: Path, **isolation: object) -> RunnerConfig:
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    return load_runner_config(write_config(folder, github, isolation=isolation))


def test_a_named_launcher_is_used_as_named(tmp_path: Path) -> None:
    script = tmp_path / "my-dockerd-rootless.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)

    assert launcher(config(tmp_path, engine_command=str(script))) == str(script)


def test_a_launcher_that_is_not_there_names_the_packages(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        launcher(config(tmp_path, engine_command="no-such-dockerd-rootless.sh"))

    assert str(missing.value) == (
        "isolation.engine_command no-such-dockerd-rootless.sh: not found (Debian: apt install"
        " docker.io rootlesskit slirp4netns uidmap)")


def test_a_work_root_too_deep_for_the_engines_sockets_is_refused(tmp_path: Path) -> None:
    short = SlotFolders(Path("/var/lib/rg/slot0"))
    deep = SlotFolders(tmp_path / ("d" * 60) / "slot0")

    check_socket_paths(short)
    with pytest.raises(ConfigError) as refused:
        check_socket_paths(deep)

    assert str(refused.value).startswith(f"work_root {deep.base.parent}: too long for the slot"
                                         " engine's sockets (")
    assert "is over 107 bytes" in str(refused.value)


def test_the_engine_runs_in_the_slots_folders_with_its_own_socket() -> None:
    folders = SlotFolders(Path("/var/lib/rg/slot1"))
    engine = SlotEngine("/usr/bin/dockerd-rootless.sh", Owner(1001, 1001), folders)

    command = engine._command()
    environment = engine._environment()

    assert engine.url == "unix:///var/lib/rg/slot1/engine/run/docker.sock"
    assert command[0] == "/usr/bin/dockerd-rootless.sh"
    assert command[command.index("--data-root") + 1] == "/var/lib/rg/slot1/engine/data"
    assert command[command.index("--host") + 1] == engine.url
    assert environment["HOME"] == "/var/lib/rg/slot1/engine"
    assert environment["XDG_RUNTIME_DIR"] == "/var/lib/rg/slot1/engine/run"
    assert environment["DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS"] == "--pidns"
    assert environment["PATH"].startswith(os.environ.get("PATH", ""))


def test_an_engine_never_started_is_not_running_and_stops_as_a_no_op(tmp_path: Path) -> None:
    engine = SlotEngine("/bin/false", Owner(os.getuid(), os.getgid()), SlotFolders(tmp_path))

    engine.stop()

    assert (engine.running(), engine.exit_status()) == (False, "not started")
