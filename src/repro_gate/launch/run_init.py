"""The init of a local run: enters the run's own namespaces, builds its view of the files, starts
the training under a PID 1 that forwards signals, and reports how the training ended.

Run by path with the gate's interpreter (`python -I -S run_init.py PLAN REPORT_FD`), before any
of the run's mounts exist, so it imports the standard library only. `PLAN` is the JSON object
`launch.namespaces.plan` writes; one JSON line goes to `REPORT_FD`:

    {"exit": N} | {"signal": N}            how the training's main process ended
    {"exec": ERRNO} | {"chdir": ERRNO}     the training could not be started
    {"setup": "MESSAGE"}                   a namespace or a mount was refused

Processes: this one (P0) unshares a user, mount, UTS and PID namespace, maps the gate's uid to
itself (root maps every uid, so files of other users can be copied up), mounts, names the host
when the plan asks (a run that varies the host name), and forks P1, the namespace's PID 1,
which mounts its /proc and forks the training. When the training's main process exits, P1
exits, and the kernel kills every process left in the namespace *before* P0's wait returns:
when the gate sees P0 end, nothing of the run is left to write into its folder.

`--check DIR` tries the same in a scratch folder under DIR (an overlay mounted over a lower
folder there) and prints why it failed, exit 1; exit 0 when the namespaces and overlayfs work.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import tempfile
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
ST_RELATIME = 4096  # statvfs's flag for relatime (MS_RELATIME has another value)
PR_SET_PDEATHSIG = 1
# Flags a remount must keep: the kernel locks those of mounts from the parent namespace.
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
ALL_IDS = 4294967295  # every uid and gid, mapped to itself (root only)

libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A namespace or mount the kernel refused: the message names the step."""


def call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)}")


def mount(source: str | None, target: str, kind: str | None, flags: int,
          options: str | None = None) -> None:
    call(libc.mount(_c(source), _c(target), _c(kind), ctypes.c_ulong(flags), _c(options)),
         f"mount {kind or 'bind'} on {target}")


def _c(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def write(path: str, text: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as error:
        raise SetupError(f"write {path}: {error.strerror}") from None


def enter_namespaces() -> None:
    """Own user, mount, UTS and PID namespaces; the gate's uid and gid mapped to themselves."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:  # a root gate maps every id: a file of any owner can be copied up
        map_every_id()
    else:
        call(libc.unshare(NAMESPACES), "unshare user, mount, uts, pid")
        write("/proc/self/setgroups", "deny")
        write("/proc/self/uid_map", f"{uid} {uid} 1")
        write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Nothing mounted here may reach the gate's namespace.
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def map_every_id() -> None:
    """Unshare, with every id mapped to itself. Only a process left in the parent namespace
    may write a map wider than its own uid: a helper forked before the unshare writes it."""
    ready, done = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(done)
        os.read(ready, 1)  # the parent has unshared (or failed: then the writes fail)
        try:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{os.getppid()}/{name}", "w") as handle:
                    handle.write(f"0 0 {ALL_IDS}")
        except OSError:
            os._exit(1)
        os._exit(0)
    os.close(ready)
    result = libc.unshare(NAMESPACES)
    code = ctypes.get_errno()
    os.close(done)
    _, status = os.waitpid(helper, 0)
    if result != 0:
        raise SetupError(f"unshare user, mount, uts, pid: {os.strerror(code)}")
    if status != 0:
        raise SetupError("write the uid and gid maps: refused")


def fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def read_only(path: str) -> None:
    """`path` bound onto itself read-only."""
    mount(path, path, None, MS_BIND | MS_REC)
    remount_read_only(path)


def remount_read_only(path: str) -> None:
    """The bind mount at `path` made read-only, its other flags kept: the kernel locks those
    of a mount from the gate's namespace (nosuid, nodev on /tmp), and refuses to drop them."""
    flags = os.statvfs(path).f_flag
    kept = (flags & KEPT_FLAGS) | (MS_RELATIME if flags & ST_RELATIME else 0)
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def mask(path: str) -> None:
    """An empty tmpfs over `path`: what the gate keeps there is out of the run's sight."""
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")


def bind(fd: int, path: str, writable: bool, is_dir: bool) -> None:
    """The folder or file open as `fd` bound at `path` (created inside a mask)."""
    if is_dir:
        os.makedirs(path, exist_ok=True)
    elif not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
    mount(fd_path(fd), path, None, MS_BIND | MS_REC)
    if not writable:
        remount_read_only(path)


def build_view(plan: dict[str, Any]) -> None:
    """The run's view of the files: see launch/namespaces.py for what each step is for."""
    # Opened before anything is mounted over them: a path may be hidden by then.
    source = plan.get("lower_source", plan["lower"])  # the workspace, or it listed otherwise
    opened = {path: os.open(path, os.O_PATH) for path in dict.fromkeys(
        [plan["lower"], source, plan["upper"], plan["scratch"], *(b[0] for b in plan["binds"])])}
    moved = plan.get("mount_at")
    try:
        for path in plan["read_only"]:
            read_only(path)
        options = (f"lowerdir={fd_path(opened[source])},"
                   f"upperdir={fd_path(opened[plan['upper']])},"
                   f"workdir={fd_path(opened[plan['scratch']])}")
        if moved is None:
            mount("overlay", plan["lower"], "overlay", 0, options)
        else:  # the working copy elsewhere: the workspace at its own path is only read
            read_only(plan["lower"])
        for path in plan["masks"]:
            mask(path)
        for path, writable in plan["binds"]:
            bind(opened[path], path, writable, os.path.isdir(fd_path(opened[path])))
        if moved is not None:  # its mount point lies in the run folder, bound by now
            mount("overlay", moved, "overlay", 0, options)
            for path in plan["moved_masks"]:
                mask(path)
        for path in plan["hidden"]:
            mask(path)
            mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        for path in [*plan["masks"], *plan.get("moved_masks", [])]:  # after the binds inside
            mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    finally:
        for fd in opened.values():
            os.close(fd)


def set_hostname(name: str | None) -> None:
    """The run's own host name, in its own UTS namespace (`None`: the host's)."""
    if name is not None:
        encoded = name.encode()
        call(libc.sethostname(encoded, len(encoded)), "sethostname")


def forward_to(pid: int) -> None:
    """Signals the gate sends reach `pid` (a training as PID 1 would ignore SIGTERM)."""

    def handler(number: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)

    for number in FORWARDED:
        signal.signal(number, handler)


def report(fd: int, value: dict[str, object]) -> None:
    os.write(fd, (json.dumps(value) + "\n").encode())


def start_training(plan: dict[str, Any], report_fd: int) -> None:
    """In the forked child: the training's own session, default signals, then exec."""
    for number in (signal.SIGPIPE, signal.SIGXFSZ, *FORWARDED):
        signal.signal(number, signal.SIG_DFL)
    os.setsid()
    try:
        os.chdir(plan["cwd"])
    except OSError as error:
        report(report_fd, {"chdir": error.errno})
        os._exit(127)
    try:
        os.execvp(plan["argv"][0], plan["argv"])  # P0 was started in the run's environment
    except OSError as error:
        report(report_fd, {"exec": error.errno})
    os._exit(127)


def init(plan: dict[str, Any], report_fd: int) -> int:
    """PID 1 of the run: start the training, forward signals, reap, report its end."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # P0 gone: the whole run goes
    # The run's own processes in /proc; where refused, the gate's /proc still serves /proc/self.
    with contextlib.suppress(SetupError):
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    main = os.fork()
    if main == 0:
        start_training(plan, report_fd)
    forward_to(main)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == main:
            if os.WIFSIGNALED(status):
                report(report_fd, {"signal": os.WTERMSIG(status)})
            else:
                report(report_fd, {"exit": os.waitstatus_to_exitcode(status)})
            return 0  # every other process of the namespace is killed as this one exits


def run(plan: dict[str, Any], report_fd: int) -> int:
    """P0: namespaces, view, then wait for P1 (and so for the whole namespace)."""
    os.set_inheritable(report_fd, False)  # the training's exec closes it
    try:
        enter_namespaces()
        build_view(plan)
        set_hostname(plan.get("hostname"))
    except (SetupError, OSError) as error:
        report(report_fd, {"setup": str(error)})
        return 1
    child = os.fork()
    if child == 0:
        os._exit(init(plan, report_fd))
    forward_to(child)
    os.waitpid(child, 0)  # returns once the kernel has emptied the namespace
    return 0


def check(parent: str) -> int:
    """Whether namespaces and an overlay work here, with the upper layer under `parent`."""
    try:
        with tempfile.TemporaryDirectory(prefix=".repro-gate-check-", dir=parent) as scratch:
            folders = {name: os.path.join(scratch, name) for name in ("lower", "upper", "work")}
            for folder in folders.values():
                os.mkdir(folder)
            enter_namespaces()
            options = ",".join(f"{name}dir={path}" for name, path in folders.items())
            mount("overlay", folders["lower"], "overlay", 0, options)
            with open(os.path.join(folders["lower"], "probe"), "w"):
                pass
            child = os.fork()  # the first child is the PID namespace's init
            if child == 0:
                os._exit(0)
            os.waitpid(child, 0)
            call(libc.umount2(_c(folders["lower"]), 2), "umount")
    except (SetupError, OSError) as error:
        print(error.strerror if isinstance(error, OSError) and error.strerror else error)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[1] == "--check":
        return check(argv[2])
    return run(json.loads(argv[1]), int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
