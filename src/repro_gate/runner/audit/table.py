"""Every attempt of `runner audit`, in the order they run and are reported: one row each, its
class, what it tries, its function. docs/runner-threat-model.md ("What runner audit tries")
describes each one.
"""

from __future__ import annotations

from repro_gate.runner.audit import devices, framing, mounts, other_slots
from repro_gate.runner.audit.steps import Attempt

OTHER = True  # needs another slot: not run with one

ATTEMPTS: tuple[Attempt, ...] = (
    Attempt("framing", "bare-LF second request in a header", framing.bare_lf_smuggling),
    Attempt("framing", "Expect: 100-continue, then HEAD, then raw", framing.expect_then_head),
    Attempt("volumes", "local volume type=tmpfs o=bind device=canary", mounts.tmpfs_bind_volume),
    Attempt("volumes", "local volume type=tmpfs o=rbind device=/", mounts.tmpfs_rbind_root),
    Attempt("volumes", "local volume type=none o=bind device=canary", mounts.none_bind_volume),
    Attempt("volumes", "repeated DriverOpts keys in raw JSON", mounts.repeated_driver_opts),
    Attempt("volumes", "volume driver options in a create body", mounts.volume_in_create_body),
    Attempt("check-then-mount", "bind a work folder dir, swap it for a symlink",
            mounts.bind_then_symlink),
    Attempt("check-then-mount", "bind a work folder dir, swap it for a symlink to the"
            " engine's socket folder", mounts.swap_to_engine_socket),
    Attempt("check-then-mount", "bind a work folder dir, swap it for a symlink to /tmp",
            mounts.swap_to_host_tmp),
    Attempt("check-then-mount", "bind a work folder dir, swap it for a symlink to /etc",
            mounts.swap_to_host_etc),
    Attempt("check-then-mount", "bind-backed volume, swap its dir for a symlink to /",
            mounts.volume_then_symlink),
    Attempt("other slots", "inspect the other slot's container",
            other_slots.inspect_other_container, OTHER),
    Attempt("other slots", "HostConfig.Links to the other slot's container",
            other_slots.links_environment, OTHER),
    Attempt("other slots", "NetworkMode container:<other>",
            other_slots.network_of_other_container, OTHER),
    Attempt("other slots", "/build?networkmode=container:<other>",
            other_slots.build_in_other_network, OTHER),
    Attempt("other slots", "ID-prefix name and rename race",
            other_slots.id_prefix_rename_race, OTHER),
    Attempt("other slots", "VolumesFrom the other slot's container",
            other_slots.volumes_from_other, OTHER),
    Attempt("other slots", "bind the other slot's work folder",
            other_slots.other_work_folder, OTHER),
    Attempt("other slots", "/build?cgroupparent=<outside the slot>",
            other_slots.build_cgroup_parent),
    Attempt("leaks", "list all containers", other_slots.container_list, OTHER),
    Attempt("leaks", "/system/df", other_slots.system_df, OTHER),
    Attempt("leaks", "network inspect", other_slots.network_inspect, OTHER),
    Attempt("leaks", "images/create fromSrc=<loopback URL>", other_slots.import_from_url),
    Attempt("leaks", "/build?remote=<loopback URL>", other_slots.build_from_remote),
    Attempt("leaks", 'SecurityOpt ["disable"]', other_slots.security_opt_disable),
    Attempt("host", "bind /", mounts.bind_host_root),
    Attempt("host", "Mounts type=bind Source=/", mounts.mount_host_root),
    Attempt("host", "bind the host's /tmp", mounts.bind_host_tmp),
    Attempt("host", "bind the canary folder", mounts.bind_canary_folder),
    Attempt("host", "Privileged", devices.privileged),
    Attempt("gpu", "DeviceRequests for the other GPU's UUID", devices.other_gpu_by_uuid),
    Attempt("gpu", 'DeviceRequests DeviceIDs ["all"]', devices.all_gpus),
    Attempt("gpu", "DeviceRequests Count -1", devices.gpu_count_all),
    Attempt("gpu", "Devices: the other GPU's /dev/nvidiaN", devices.other_gpu_device),
)
