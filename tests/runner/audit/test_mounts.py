"""The audit's mount attempts through the real proxy: local volumes whose driver options bind
host paths, a repeated key in raw JSON, and binds of the host's own folders, each refused by
the filter with the rule that stops it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from repro_gate.runner.audit import mounts
from repro_gate.runner.audit.engine import Blocked, Finding, Outcome
from repro_gate.runner.audit.steps import Context


@pytest.mark.parametrize(("attempt", "refusal"), [
    (mounts.tmpfs_bind_volume, "volume create: 403 repro-gate docker proxy: DriverOpts is"
                               " refused"),
    (mounts.tmpfs_rbind_root, "volume create: 403 repro-gate docker proxy: DriverOpts is"
                              " refused"),
    (mounts.none_bind_volume, "volume create: 403 repro-gate docker proxy: DriverOpts is"
                              " refused"),
    (mounts.repeated_driver_opts, "volume create: 403 repro-gate docker proxy: repeated key"),
    (mounts.volume_in_create_body, "create: 403 repro-gate docker proxy: HostConfig.Mounts."
                                   "VolumeOptions.DriverConfig.Options is refused"),
    (mounts.bind_host_root, "create: 403 repro-gate docker proxy: bind '/' is refused"),
    (mounts.mount_host_root, "create: 403 repro-gate docker proxy: bind mount '/' is refused"),
    (mounts.bind_host_tmp, "create: 403 repro-gate docker proxy: bind '/tmp' is refused"),
])
def test_the_filter_refuses_each_mount_of_the_host(
    attempt: Callable[[Context], Finding], refusal: str, audit: Context
) -> None:
    with pytest.raises(Blocked) as blocked:
        attempt(audit)

    assert blocked.value.finding.outcome is Outcome.REFUSED_BY_FILTER
    assert blocked.value.finding.detail.startswith(refusal), blocked.value.finding.detail
    assert audit.engine.containers == []


def test_the_canary_folder_is_outside_the_work_folder(audit: Context) -> None:
    with pytest.raises(Blocked) as blocked:
        mounts.bind_canary_folder(audit)

    assert (f"bind '{audit.canaries.host_folder}' is refused: only paths inside the slot's work"
            " folder") in blocked.value.finding.detail


def test_a_bind_inside_the_work_folder_passes_the_filter(audit: Context) -> None:
    # The check-then-mount attempt's first step is legitimate: here it reaches the proxy's
    # upstream, where no engine answers.
    with pytest.raises(Blocked) as blocked:
        mounts.bind_then_symlink(audit)

    assert blocked.value.finding.detail.startswith(
        "create: 502 repro-gate docker proxy: cannot reach the Docker daemon")
    checked = audit.scratch / f"{audit.prefix}swap-0"
    assert checked.is_dir() and not checked.is_symlink()  # not swapped: the create failed
