"""Which containers are the slot's, and what the proxy writes into a body: the runner's socket
path pointed at the slot's proxy socket, the slot's label, listings narrowed to the slot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers.slot_policies import (
    CID,
    RUNNER_SOCKET,
    SLOT_GPU,
    host,
    policy_for,
    socket_mount,
    with_paths,
)

from repro_gate.runner.proxy.ownership import (
    REPOSITORY_LABEL,
    SLOT_LABEL,
    Owned,
    implicit_volumes,
    is_owned,
    labelled,
    narrowed_network,
    referenced_containers,
    scoped,
    with_gpu_groups,
    with_slot_socket,
)
from repro_gate.runner.proxy.policy import SlotPolicy, check_create
from repro_gate.runner.proxy.routes import Handling, route

# (create body, the body forwarded); `{proxy}` is the slot's proxy socket on the host.
SOCKET_REWRITTEN = [
    # The runner's `docker create -v "/var/run/docker.sock":"/var/run/docker.sock"`.
    (host(Binds=[f"{RUNNER_SOCKET}:{RUNNER_SOCKET}", "{work}/data:/data:ro"]),
     host(Binds=[f"{{proxy}}:{RUNNER_SOCKET}", "{work}/data:/data:ro"])),
    (host(Binds=["/run/docker.sock:/inner.sock:ro"]), host(Binds=["{proxy}:/inner.sock:ro"])),
    # `--mount type=bind,source=/var/run/docker.sock,target=…,readonly`.
    (host(Mounts=[socket_mount(RUNNER_SOCKET, ReadOnly=True)]),
     host(Mounts=[socket_mount("{proxy}", ReadOnly=True)])),
    # Every place and spelling the daemon reads a bind from, as check_create reads them.
    ({"Image": "python", "hostconfig": {"binds": [f"{RUNNER_SOCKET}:/s"]}},
     {"Image": "python", "hostconfig": {"binds": ["{proxy}:/s"]}}),
    ({"Image": "python", "Binds": [f"{RUNNER_SOCKET}:/s"]},
     {"Image": "python", "Binds": ["{proxy}:/s"]}),
    ({"Image": "python", "HostConfig": {"mounts": [{"type": "bind", "source": RUNNER_SOCKET}]}},
     {"Image": "python", "HostConfig": {"mounts": [{"type": "bind", "source": "{proxy}"}]}}),
]








@pytest.mark.parametrize(("body", "forwarded"), SOCKET_REWRITTEN)
def test_the_runners_socket_path_is_rewritten_to_the_slots_proxy_socket(
    body: dict[str, Any], forwarded: dict[str, Any], socket_policy: SlotPolicy
) -> None:
    work, proxy = socket_policy.work_folder, socket_policy.proxy_socket
    assert proxy is not None
    body = with_paths(body, work, proxy)

    assert check_create(body, socket_policy) is None
    assert with_slot_socket(body, socket_policy) == with_paths(forwarded, work, proxy)



def test_what_a_request_names_and_how_listings_are_narrowed() -> None:
    body = host(PidMode="container:pid-peer", NetworkMode="bridge")
    policy = SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=Path("/work"))

    listing = scoped('/containers/json?all=1&filters={"label":["a=b"]}', policy)
    events = scoped('/events?filters={"label":{"a=b":true}}', policy)

    assert referenced_containers(body) == ["pid-peer"]
    assert referenced_containers({"Container": "peer"}) == ["peer"]
    assert route("POST", f"/v1.41/exec/{CID}/start").exec_id == CID
    assert route("POST", f"/v1.41/commit?container={CID}&repo=x").container == CID
    assert route("GET", "/v1.41/containers/x%2Fy/json?a=b;c").decision.handling is Handling.REFUSE
    assert route("GET", f"/v1.41/containers/{CID}/logs?a=b;c").target == (
        f"/v1.41/containers/{CID}/logs?a=b%3Bc")
    assert parse_qs(urlsplit(listing).query)["all"] == ["1"]
    assert json.loads(parse_qs(urlsplit(listing).query)["filters"][0]) == {
        "label": ["a=b", f"{SLOT_LABEL}={SLOT_GPU}"]}
    assert json.loads(parse_qs(urlsplit(events).query)["filters"][0]) == {
        "label": {"a=b": True, f"{SLOT_LABEL}={SLOT_GPU}": True}}



def test_a_create_gets_the_slots_label_whatever_the_job_labelled() -> None:
    policy = policy_for(Path("/work"))
    body = {"Image": "python", "labels": {SLOT_LABEL: "GPU-other", "team": "ml"}}

    assert labelled(body, policy) == {
        "Image": "python", "Labels": {SLOT_LABEL: SLOT_GPU, "team": "ml"}}


def test_on_a_slot_dedicated_to_a_repository_what_a_job_creates_carries_that_repository(
) -> None:
    policy = policy_for(Path("/work"), repository="octo-org/trainer")
    volume = {"Name": "repro-gate-env-1", "Labels": {REPOSITORY_LABEL: "octo-org/other"}}

    assert labelled(volume, policy) == {"Name": "repro-gate-env-1", "Labels": {
        SLOT_LABEL: SLOT_GPU, REPOSITORY_LABEL: "octo-org/trainer"}}


def test_the_named_volumes_a_create_would_make_implicitly_are_found_wherever_given() -> None:
    body = host(Binds=["cache:/cache:ro", "/work/data:/data", RUNNER_SOCKET + ":/s", "cache:/c"],
                Mounts=[{"Type": "volume", "Source": "models", "Target": "/m"},
                        {"Source": "implicit-type", "Target": "/i"},
                        {"Type": "volume", "Target": "/anonymous"},
                        {"Type": "bind", "Source": "/work/x", "Target": "/x"},
                        {"Type": "tmpfs", "Target": "/t"}])
    top_level = {"Image": "python", "Binds": ["old-style:/o"]}

    assert implicit_volumes(body) == ["cache", "models", "implicit-type"]
    assert implicit_volumes(top_level) == ["old-style"]
    assert implicit_volumes(host(Binds=["/work/a:/a"])) == []


def test_only_a_create_that_asks_for_the_gpu_gets_the_slots_gpu_groups() -> None:
    policy = policy_for(Path("/work"), gpu_groups=("0",))
    asks = host(DeviceRequests=[{"DeviceIDs": [SLOT_GPU]}], GroupAdd=["video", 0])

    assert with_gpu_groups(asks, policy)["HostConfig"]["GroupAdd"] == ["video", "0"]
    assert with_gpu_groups(host(GroupAdd=["video"]), policy) == host(GroupAdd=["video"])
    assert with_gpu_groups(asks, policy_for(Path("/work"))) == asks


def test_a_network_answer_keeps_only_the_slots_containers() -> None:
    other = "f" * 64
    answer = json.dumps([{"Name": "bridge", "Containers": {CID: {"Name": "own"},
                                                          other: {"Name": "theirs"}}},
                         {"Name": "none"}]).encode()

    narrowed = json.loads(narrowed_network(answer, Owned(containers={CID})))

    assert narrowed == [{"Name": "bridge", "Containers": {CID: {"Name": "own"}}},
                        {"Name": "none"}]
    assert narrowed_network(b"not json", Owned()) == b"{}"


def test_an_inspected_container_is_the_slots_only_with_its_id_and_label() -> None:
    policy = policy_for(Path("/work"))
    runner = {"Id": CID, "Config": {"Labels": {SLOT_LABEL: SLOT_GPU}}}

    assert is_owned(runner, CID, policy)
    assert not is_owned(runner, "e" * 64, policy)
    assert not is_owned({"Id": CID, "Config": {"Labels": {SLOT_LABEL: "GPU-other"}}}, CID,
                        policy)
    assert not is_owned({"Id": CID, "Config": {"Labels": None}}, CID, policy)
