"""The kernel boundary under each slot: real rootless engines under real users, made by the real
`runner setup` and brought up by the real `runner slot-endpoint` (tests/helpers/rootless_slots.py).

The slots' endpoints and the images loaded into their engines are the module's: the tests that
only use an endpoint come first; those that end one (to assert on how it stops) and those of
`serve` and `audit` (which bring the slots up themselves) come after them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
import requests
import yaml
from helpers.docker_fixtures import PinnedImage
from helpers.fake_github import FakeGitHub
from helpers.rootless_slots import (
    USER_PREFIX,
    RootlessHost,
    SlotEndpoints,
    SlotImages,
    load_image,
    repro_gate,
    write_rootless_config,
)
from helpers.runner_files import ASK_FOR_OTHER_GPU, SLOT_UUIDS
from helpers.serve_process import Serve

from repro_gate.runner.proxy.ownership import SLOT_LABEL

pytestmark = pytest.mark.docker
# Each try prints what it got or the error it met.
ATTEMPT = """
for what in ("open({canary!r}).read()", "open('/host/etc/rg-pwned', 'a').write('pwned')",
             "open({other!r}).read()"):
    try:
        print(eval(what))
    except OSError as error:
        print(error)
"""


@pytest.fixture
def canary() -> Iterator[tuple[Path, str]]:
    """A secret in a file only root may read, in a folder only root may enter."""
    folder = Path("/root") / f"rg-canary-{secrets.token_hex(4)}"
    folder.mkdir(mode=0o700)
    secret = secrets.token_hex(16)
    path = folder / "canary"
    path.write_text(secret)
    path.chmod(0o600)
    yield path, secret
    path.unlink()
    folder.rmdir()


def slot_user_ids(slot: int) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(f"{USER_PREFIX}{slot}")
    return entry.pw_uid, entry.pw_gid


def run(client: docker.DockerClient, image: str, script: str, **options: object) -> str:
    """The Python script's output, whatever its exit code (stderr included)."""
    container = client.containers.create(image, ["python3", "-c", script], **options)
    try:
        container.start()
        container.wait(timeout=60)
        return str(container.logs(stdout=True, stderr=True).decode(errors="replace"))
    finally:
        container.remove(force=True)


def test_setup_made_a_user_ids_and_private_folders_per_slot_and_a_second_run_changes_nothing(
    rootless_host: RootlessHost,
) -> None:
    again = repro_gate("runner", "setup", "--config", str(rootless_host.config))
    assert (again.returncode, again.stdout.strip(), again.stderr) == (0, "nothing to change", "")
    owners = set()
    for slot in (0, 1):
        uid, _ = slot_user_ids(slot)
        assert uid != 0
        folder = rootless_host.folder(slot).stat()
        assert (folder.st_uid, folder.st_mode & 0o777) == (uid, 0o700)
        owners.add(uid)
        for kind in ("uid", "gid"):
            lines = Path(f"/etc/sub{kind}").read_text().splitlines()
            assert f"{USER_PREFIX}{slot}:{1_600_000_000 + slot * 65536}:65536" in lines
    assert len(owners) == 2
    assert os.stat("/dev/net/tun").st_mode & 0o666 == 0o666


def test_setup_refuses_an_overlapping_id_range_in_one_line_before_making_anything(
    tmp_path: Path, rootless_host: RootlessHost,
) -> None:
    work_root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp")) / "w"  # short: sockets
    work_root.parent.chmod(0o711)
    config = write_rootless_config(tmp_path, work_root, user_prefix="rgclash-slot",
                                   subordinate_id_base=1_600_000_000 + 1000)
    done = repro_gate("runner", "setup", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert f"{USER_PREFIX}0 already has 1600000000-1600065535" in done.stderr
    assert "rgclash-slot0" not in Path("/etc/passwd").read_text()
    assert not work_root.exists()
    work_root.parent.rmdir()


def test_setup_refuses_a_work_root_under_a_folder_the_slot_users_cannot_pass(
    tmp_path: Path, rootless_host: RootlessHost,
) -> None:
    closed = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # 0700
    try:
        config = write_rootless_config(tmp_path, closed / "w")
        done = repro_gate("runner", "setup", "--config", str(config))
    finally:
        closed.rmdir()
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{closed} is closed to other users (mode 0700)" in done.stderr


def test_with_the_filter_gone_the_slot_engine_still_cannot_reach_root_files_or_another_slot(
    rootless_host: RootlessHost, slot_endpoints: SlotEndpoints, slot_images: SlotImages,
    canary: tuple[Path, str],
) -> None:
    """Requests sent straight to the slot's engine, past the filter, as if it had fallen."""
    canary_path, secret = canary
    other_work = rootless_host.folder(1) / "work"
    other_file = other_work / "other-slot-canary"
    other_file.write_text(secret)
    engine = slot_endpoints.engine(0)
    image = slot_images.python
    try:
        attempts = {
            "host root, privileged": dict(volumes={"/": {"bind": "/host", "mode": "rw"}},
                                          privileged=True),
            "the canary's folder": dict(volumes={str(canary_path.parent): {"bind": "/host/root"
                                        f"/{canary_path.parent.name}", "mode": "rw"}}),
        }
        command = ATTEMPT.format(canary=f"/host{canary_path}", other=f"/host{other_file}")
        for what, options in attempts.items():
            try:
                output = run(engine, image, command, **options)
            except docker.errors.APIError as refused:  # the engine refused the mount itself
                output = str(refused)
            assert secret not in output, what
            assert "permission denied" in output.lower(), (what, output)
        assert not Path("/etc/rg-pwned").exists()
        try:
            output = run(engine, image, "print(open('/o/other-slot-canary').read())",
                         volumes={str(other_work): {"bind": "/o", "mode": "ro"}})
        except docker.errors.APIError as refused:
            output = str(refused)
        assert secret not in output
        assert "permission denied" in output.lower()
    finally:
        engine.close()
        other_file.unlink()


def test_a_container_user_that_asks_for_the_gpu_gets_the_slots_group_which_owns_the_gpu_node(
    rootless_host: RootlessHost, slot_endpoints: SlotEndpoints, slot_images: SlotImages,
) -> None:
    """A file made like the slot's GPU node (root, the slot's group, 0660) stands in for it:
    no GPU here."""
    work = rootless_host.folder(0) / "work"
    node = work / "nvidia-node"
    node.write_text("gpu")
    os.chown(node, 0, slot_user_ids(0)[1])
    node.chmod(0o660)
    endpoint = slot_endpoints[0]
    image = slot_images.python
    try:
        script = "print(open('/w/nvidia-node').read())"
        volumes = {str(work): {"bind": "/w", "mode": "ro"}}
        gpu = [docker.types.DeviceRequest(device_ids=[SLOT_UUIDS[0]], capabilities=[["gpu"]])]
        with_gpu = run(endpoint.client, image, script, user="1001:1001", volumes=volumes,
                       device_requests=gpu)
        without = run(endpoint.client, image, script, user="1001:1001", volumes=volumes)
    finally:
        node.unlink()
    assert with_gpu.strip() == "gpu"
    assert "Permission denied" in without


def test_a_second_endpoint_for_a_slot_in_use_is_refused_in_one_line(
    rootless_host: RootlessHost, slot_endpoints: SlotEndpoints,
) -> None:
    endpoint = slot_endpoints[0]
    try:
        second = repro_gate("runner", "slot-endpoint", "--config", str(rootless_host.config),
                            "--slot", "0")
        assert second.returncode == 2
        assert second.stdout == "" and second.stderr.count("\n") == 1
        assert "slot 0 is in use by another repro-gate runner process" in second.stderr
        assert endpoint.client.ping()  # the first one is untouched
    finally:
        code, _ = slot_endpoints.stop(0)  # the test is how it stops: it ends here
    assert code == 0


def test_a_job_loads_runs_execs_and_removes_its_containers_with_its_gpu_and_sigterm_cleans_up(
    rootless_host: RootlessHost, slot_endpoints: SlotEndpoints, slot_images: SlotImages,
) -> None:
    endpoint = slot_endpoints[0]
    image = slot_images.python  # loaded through the endpoint
    work = rootless_host.folder(0) / "work"
    container = None
    try:
        container = endpoint.client.containers.create(
            image, ["python3", "-c", "import time; open('/w/out', 'w').write('hello');"
                    " print('hello', flush=True); time.sleep(60)"],
            volumes={str(work): {"bind": "/w", "mode": "rw"}},
            device_requests=[docker.types.DeviceRequest(device_ids=[SLOT_UUIDS[0]],
                                                        capabilities=[["gpu"]])])
        assert len(container.id) == 64
        container.start()
        exec_result = container.exec_run(["python3", "-c", "import os; print(os.getuid())"])
        assert exec_result.exit_code == 0 and exec_result.output.strip() == b"0"
        container.kill()
        assert container.wait(timeout=60)["StatusCode"] != 0
        assert b"hello" in container.logs()
        container.remove()
        # Root in the container is the slot's user on the host.
        written = (work / "out").stat()
        assert (written.st_uid, written.st_gid) == slot_user_ids(0)
        assert rootless_host.visible_devices()[container.id] == SLOT_UUIDS[0]
    finally:
        if container is not None:
            with contextlib.suppress(docker.errors.APIError):  # already removed
                container.remove(force=True)
        code, errors = slot_endpoints.stop(0)  # the test is how it stops: it ends here
    assert (code, errors) == (0, "")
    uid, _ = slot_user_ids(0)
    left = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout
    assert left == ""
    assert not endpoint.socket.exists()
    (work / "out").unlink()


def test_a_slot_engine_that_dies_is_started_again_behind_the_same_endpoint(
    slot_endpoints: SlotEndpoints,
) -> None:
    endpoint = slot_endpoints[1]
    try:
        uid, _ = slot_user_ids(1)
        killed = subprocess.run(["pkill", "-KILL", "-u", str(uid), "-x", "rootlesskit"],
                                capture_output=True)
        assert killed.returncode == 0
        deadline = time.monotonic() + 60
        while True:
            try:
                assert endpoint.client.ping()
                break
            except (docker.errors.DockerException, requests.RequestException):
                assert time.monotonic() < deadline, "the engine did not come back"
                time.sleep(0.5)
    finally:
        code, errors = slot_endpoints.stop(1)  # its engine was killed, and what it said is read
    assert code == 0
    assert "the slot's engine stopped (exit status" in errors
    assert "the slot's engine is back" in errors


# The job: who am I on the host, and may I have the other slot's GPU?
JOB_START = r'''
import http.client, json, os, socket, time
from pathlib import Path
Path("marker").write_text("written by the job")
other = [u for u in os.environ["TEST_SLOTS"].split() if u != os.environ["REPRO_GATE_GPUS"]][0]
'''
JOB_END = r'''
while not Path("release").exists():
    time.sleep(0.1)
'''
JOB = JOB_START + ASK_FOR_OTHER_GPU + JOB_END


def test_the_service_runs_each_slots_runner_on_the_slots_own_engine_as_the_slots_user(
    tmp_path: Path, rootless_host: RootlessHost, slot_endpoints: SlotEndpoints,
    slot_images: SlotImages, github: FakeGitHub,
) -> None:
    image = slot_images.standin  # in both engines, which keep their images
    slot_endpoints.release()  # the service brings both slots up itself
    document = yaml.safe_load(rootless_host.config.read_text())
    document["github"].update(api_url=github.base_url)
    document["github"]["auth"]["token_file"] = str(rootless_host.config.parent / "token")
    document.update(host="gpuhost", metrics={"listen": "127.0.0.1:0"}, drain_timeout_seconds=60,
                    runner={"image": image, "network": "none", "environment": {
                        "STANDIN_JOB": 'python3 -c "$TEST_JOB"', "TEST_JOB": JOB,
                        "TEST_SLOTS": " ".join(SLOT_UUIDS)}})
    config = tmp_path / "runner.yml"
    config.write_text(yaml.safe_dump(document))
    service = Serve(config, env={**os.environ,
                                 "PATH": f"{rootless_host.hook_dir}:{os.environ['PATH']}"})
    try:
        for slot, uuid in enumerate(SLOT_UUIDS):
            service.wait_for(f"slot {slot}: job started on {uuid}$")
            service.wait_for(f"slot {slot} runner: PROXY-OTHER-GPU 403$")  # waiting now
        seen = rootless_host.visible_devices()
        for slot, uuid in enumerate(SLOT_UUIDS):
            engine = docker.DockerClient(
                base_url=f"unix://{rootless_host.folder(slot)}/engine/run/docker.sock")
            [runner] = engine.containers.list(filters={"label": f"{SLOT_LABEL}={uuid}"})
            engine.close()
            assert seen[runner.id] == uuid  # the NVIDIA hook of the slot's own engine
            assert runner.attrs["HostConfig"]["GroupAdd"] == ["0"]  # the GPU node's group
            workspace = rootless_host.folder(slot) / "work" / "repo" / "repo"
            # The job's files belong to the slot's user or one of its subordinate IDs.
            owner = (workspace / "marker").stat().st_uid
            first = 1_600_000_000 + slot * 65536
            assert owner == slot_user_ids(slot)[0] or first <= owner < first + 65536
            (workspace / "release").write_text("go")
        for slot in (0, 1):
            [found] = service.wait_for(rf"slot {slot} runner: STANDIN-RESULT (\{{.*\}})$")
            assert json.loads(found.group(1))["job_exit"] == 0
    finally:
        service.signal(signal.SIGTERM)
        code = service.finish()
    assert code == 0, service.log()
    assert "Traceback" not in service.log()
    for slot in (0, 1):
        uid, _ = slot_user_ids(slot)
        assert subprocess.run(["pgrep", "-u", str(uid)], capture_output=True).stdout == b""


def test_runner_audit_on_both_slots_of_a_two_slot_config_reports_nothing_escaped(
    tmp_path: Path, rootless_host: RootlessHost, slot_endpoints: SlotEndpoints,
    slot_images: SlotImages, docker_client: docker.DockerClient, python_image: PinnedImage,
) -> None:
    # The attempts need an image with a shell in both engines; the service's resets before
    # this test kept only its own runner image.
    image = load_image(docker_client, python_image, slot_endpoints[0].client,
                       slot_endpoints[1].client)
    slot_endpoints.release()  # the audit brings both slots up itself
    document = yaml.safe_load(rootless_host.config.read_text())
    document["github"]["auth"]["token_file"] = str(rootless_host.config.parent / "token")
    document["runner"]["image"] = image
    config = tmp_path / "runner.yml"
    config.write_text(yaml.safe_dump(document))
    env = {**os.environ, "PATH": f"{rootless_host.hook_dir}:{os.environ['PATH']}"}
    for slot in (0, 1):
        done = repro_gate("runner", "audit", "--config", str(config), "--slot", str(slot),
                          env=env, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = [line for line in done.stdout.splitlines()[1:] if line.strip()][:-1]
        assert len(rows) >= 30
        assert not any(" ESCAPED " in f" {row} " for row in rows), done.stdout
        assert done.stdout.rstrip().endswith("nothing escaped")
        # A folder swapped for a link between check and mount: the filter pinned the folder
        # it checked (then removed by the swap), so the engine mounts that one or nothing.
        swaps = [row for row in rows if "swap it for a symlink" in row]
        assert len(swaps) == 4, swaps
        assert all("no effect" in row or "stopped by engine" in row for row in swaps), swaps
        [reset] = [row for row in rows if row.startswith("reset")]
        assert "none survived the reset" in reset, reset
    uids = [str(slot_user_ids(slot)[0]) for slot in (0, 1)]
    assert subprocess.run(["pgrep", "-u", ",".join(uids)], capture_output=True).stdout == b""
