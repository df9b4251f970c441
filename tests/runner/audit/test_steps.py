"""The steps the audit's attempts share: the probe container's body, a shell loop that prints
a file with builtins only, host paths under a mount, a build context, a finding from what was
read back, and the run's unique names."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from repro_gate.runner.audit.engine import Blocked, Outcome
from repro_gate.runner.audit.steps import (
    Context,
    build_context,
    cat,
    inside,
    local_volume,
    probe_body,
    seen,
)


def test_a_probe_runs_its_script_with_no_network_unless_asked(audit: Context) -> None:
    body = probe_body(audit, {"Binds": ["/w:/w"]}, "echo hi", Env=["A=b"])
    networked = probe_body(audit, {"NetworkMode": "default"})

    assert body == {"Image": audit.target.image, "Cmd": ["/bin/sh", "-c", "echo hi"],
                    "Env": ["A=b"], "HostConfig": {"NetworkMode": "none", "Binds": ["/w:/w"]}}
    assert networked["HostConfig"] == {"NetworkMode": "default"}
    assert networked["Cmd"] == ["/bin/sh", "-c", "true"]


def test_cat_prints_a_file_with_shell_builtins_only(tmp_path: Path) -> None:
    path = tmp_path / "status"
    path.write_text("Name:\tsh\nCapEff:\t0000003fffffffff")  # no newline at the end

    printed = subprocess.run(["/bin/sh", "-c", cat(str(path))], capture_output=True,
                             text=True, check=True, env={}, timeout=10).stdout

    assert printed == "Name:\tsh\nCapEff:\t0000003fffffffff\n"


def test_host_paths_under_a_mount_of_the_hosts_root() -> None:
    assert inside("/host", Path("/root/canary")) == "/host/root/canary"


def test_a_build_context_holds_only_the_dockerfile() -> None:
    context = build_context("FROM busybox\nRUN true\n")

    with tarfile.open(fileobj=io.BytesIO(context)) as tar:
        names = tar.getnames()
        dockerfile = tar.extractfile("Dockerfile")
        assert dockerfile is not None
        text = dockerfile.read().decode()

    assert (names, text) == (["Dockerfile"], "FROM busybox\nRUN true\n")


def test_a_canary_read_back_is_an_escape(audit: Context) -> None:
    escaped = seen(audit, f"CANARY={audit.canaries.secret}-c".encode(), "in its environment")
    nothing = seen(audit, b"PATH=/bin", "in its environment")
    missing = seen(audit, None, "at /v/canary")

    assert (escaped.outcome, escaped.detail) == (
        Outcome.ESCAPED, "read the other slot's container canary in its environment")
    assert (nothing.outcome, nothing.detail) == (
        Outcome.NO_EFFECT, "created; no canary in its environment")
    assert missing.outcome is Outcome.NO_EFFECT


def test_names_are_unique_to_the_run(audit: Context) -> None:
    names = [audit.name("mount"), audit.name("mount"), audit.name("volume")]

    assert names == [f"{audit.prefix}mount-0", f"{audit.prefix}mount-1",
                     f"{audit.prefix}volume-2"]


def test_a_volume_with_driver_options_is_refused_by_the_filter(audit: Context) -> None:
    with pytest.raises(Blocked) as blocked:
        local_volume(audit, {"type": "none", "o": "bind", "device": "/"})

    assert blocked.value.finding.outcome is Outcome.REFUSED_BY_FILTER
    assert blocked.value.finding.detail.startswith(
        "volume create: 403 repro-gate docker proxy: DriverOpts is refused")
    assert audit.engine.volumes == []
