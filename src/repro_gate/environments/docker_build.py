"""The script that builds (or seals) an environment in a volume, inside the training image, and
its answer (docker_volumes.py says why it is built this way).

The script runs as `python -c BUILD_SCRIPT <spec JSON>` with the image's own interpreter, so it
is stdlib only and knows nothing of repro_gate: everything it needs is in the spec. It holds
`flock` on the volume's lock file until it exits, and its last line of output is one JSON object:

    {"marker": {...}}                   the volume already holds a complete environment
    {"failed": "create"|"install", "check": {returncode, stdout, stderr}}
    {"check": {...}, "python": "..."}   built (now, or by a gate that has not sealed it yet);
                                        the consistency check's output, to be judged
    {"gone": true}                      seal: the finished build is no longer there
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from repro_gate.environments.installer import failure_line
from repro_gate.environments.package_sources import InstallGroup
from repro_gate.errors import ErrorKind, GateError

BUILD_SCRIPT = r"""
import fcntl, glob, json, os, shutil, site, subprocess, sys
spec = json.loads(sys.argv[1])
root = spec["root"]
def path(name):
    return os.path.join(root, name)
def say(**answer):
    print("\n" + json.dumps(answer), flush=True)
    sys.exit(0)
def output(done):
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
def read(name):
    try:
        with open(path(name)) as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("key") == spec["key"] else None
def write(name, document):  # create, then rename: a reader sees no file or a whole one
    with open(path(name + ".tmp"), "w") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
    os.replace(path(name + ".tmp"), path(name))
def run(step, argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        say(failed=step, check=output(done))
def clear():  # what an earlier build left, the lock file excepted
    for name in os.listdir(root):
        target = path(name)
        if name == spec["lock"]:
            continue
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
lock = os.open(path(spec["lock"]), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel when this process ends
if read(spec["marker"]) is not None:
    say(marker=read(spec["marker"]))
if spec["mode"] == "seal":
    if read(spec["built"]) is None:
        say(gone=True)
    write(spec["marker"], spec["document"])
    say(marker=spec["document"])
built = read(spec["built"])
if built is not None:  # finished by a gate that has not sealed it yet: its check stands
    say(check=built["check"], python=built["python"])
clear()
uv, python = spec["uv"], path("bin/python")
flag = ["--system-site-packages"] if spec["inherit"] else []
run("create", [uv, "venv", "--quiet", "--no-project", "--allow-existing", "--python",
               sys.executable, *flag, root])
if spec["inherit"]:
    # As virtualenvs.py does: the base's own site directories after the environment's.
    added = "; ".join("site.addsitedir(%r)" % entry for entry in site.getsitepackages())
    site_dir = sorted(glob.glob(path("lib/*/site-packages")))[0]
    with open(os.path.join(site_dir, spec["pth"]), "w") as handle:
        handle.write("import site; " + added + "\n" if added else "")
with open(path(spec["pins_file"]), "w") as handle:
    handle.write(spec["pins_text"])  # credentials masked
for number, group in enumerate(spec["groups"]):
    # One install per source; its file (credentials in it) lives in the container's tmpfs.
    group_file = "/tmp/repro-gate-install-%d.txt" % number
    with open(group_file, "w") as handle:
        handle.write(group["text"])
    hashes = ["--require-hashes"] if group["hashes"] else []
    # Compiled now: the training mounts the volume read-only, so it could never cache them.
    run("install", [uv, "pip", "install", "--python", python, "--no-deps", "--compile-bytecode",
                    *hashes, "-r", group_file])
if spec["inherit"]:
    check = [python, "-c", spec["facts"]]
else:
    check = [uv, "pip", "check", "--python", python]
done = subprocess.run(check, capture_output=True, text=True)
write(spec["built"], {"key": spec["key"], "check": output(done), "python": sys.executable})
say(check=output(done), python=sys.executable)
"""


def build_request(key: str, groups: list[InstallGroup]) -> dict[str, Any]:
    """The spec of a build: one install per group (the text with its index passwords, read in
    the container's tmpfs), and what the volume keeps of them (masked)."""
    return {"mode": "build", "key": key,
            "groups": [{"text": group.text(), "hashes": group.require_hashes}
                       for group in groups],
            "pins_text": "".join(group.masked_text() for group in groups)}


@dataclass(frozen=True)
class BuildAnswer:
    """What the script said (the module docstring lists the answers)."""

    check: subprocess.CompletedProcess[str]  # the failed step's output, or the check's
    marker: dict[str, Any] | None = None  # the volume's complete marker
    failed: str | None = None  # the step that failed: create | install
    python: str = ""  # the image's interpreter, as the build found it

    @classmethod
    def parse(cls, completed: subprocess.CompletedProcess[str], what: str) -> BuildAnswer:
        """The answer on the script's last line; an ENVIRONMENT GateError when there is none
        (the script itself failed: no usable `python` in the image, say)."""
        lines = completed.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1])
            output = answer.get("check") or {"returncode": 0, "stdout": "", "stderr": ""}
            check = subprocess.CompletedProcess(
                completed.args, int(output["returncode"]), str(output["stdout"]),
                str(output["stderr"]))
            return cls(check, answer.get("marker"), answer.get("failed"),
                       str(answer.get("python", "")))
        except (IndexError, ValueError, TypeError, KeyError, AttributeError):
            raise GateError(f"{what} failed: {failure_line(completed)}",
                            kind=ErrorKind.ENVIRONMENT) from None
