"""JSON bodies as the proxy reads and rebuilds them: decoded strictly, rebuilt from the schema of
each endpoint, keys spelled as the Engine API spells them, fields that must stay empty dropped."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.runner.proxy.bodies import (
    CONTAINER_CREATE,
    EXEC_CREATE,
    NETWORK_CREATE,
    VOLUME_CREATE,
    BodyRefused,
    decode,
    rebuilt,
)


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"Name": "a", "Name": "b"}', "repeated key 'Name' is refused"),
    (b'{"HostConfig": {"Memory": 1, "Memory": 2}}', "repeated key 'Memory' is refused"),
    (b'{"CpuShares": NaN}', "NaN is not JSON"),
    (b'{"Memory": Infinity}', "Infinity is not JSON"),
    (b"{not json", "malformed JSON body"),
    (b'{"Image": "\xff"}', "malformed JSON body"),
])
def test_decode_refuses_what_two_readers_could_read_differently(raw: bytes, reason: str) -> None:
    with pytest.raises(BodyRefused) as refused:
        decode(raw)

    assert reason in str(refused.value)


def test_an_empty_body_decodes_to_an_empty_object() -> None:
    assert decode(b"") == {}
    assert decode(b'{"Cmd": ["true"], "Tty": false}') == {"Cmd": ["true"], "Tty": False}


def test_a_create_body_is_rebuilt_with_the_known_fields_and_without_empty_ones() -> None:
    body = {"Image": "python", "Cmd": ["python", "-V"], "Labels": {"team": "ml"},
            "HostConfig": {"Binds": ["/w:/w"], "Links": [], "VolumesFrom": None,
                           "DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": ["GPU-1"],
                                               "Capabilities": [["gpu"]]}]},
            "NetworkingConfig": {"EndpointsConfig": {"bridge": {"Aliases": ["job"]}}}}

    forwarded = rebuilt(body, CONTAINER_CREATE)

    assert forwarded == {
        "Image": "python", "Cmd": ["python", "-V"], "Labels": {"team": "ml"},
        "HostConfig": {"Binds": ["/w:/w"], "DeviceRequests": [
            {"Driver": "nvidia", "DeviceIDs": ["GPU-1"], "Capabilities": [["gpu"]]}]},
        "NetworkingConfig": {"EndpointsConfig": {"bridge": {"Aliases": ["job"]}}}}


@pytest.mark.parametrize(("body", "schema", "reason"), [
    ({"image": "python"}, CONTAINER_CREATE, "key 'image' is refused: the API spells it 'Image'"),
    ({"Image": "x", "HostConfig": {"privileged": True}}, CONTAINER_CREATE,
     "key 'HostConfig.privileged' is refused: the API spells it 'Privileged'"),
    ({"Image": "x", "Privileged": True}, CONTAINER_CREATE, "unknown key 'Privileged' is refused"),
    ({"Image": "x", "HostConfig": {"Links": ["other:peer"]}}, CONTAINER_CREATE,
     "HostConfig.Links is refused: it would copy another container's environment into"
     " this one"),
    ({"Image": "x", "HostConfig": {"MaskedPaths": []}}, CONTAINER_CREATE,
     "HostConfig.MaskedPaths is refused: Docker's defaults for /proc and /sys stand"),
    ({"Image": "x", "HostConfig": {"Binds": "/etc:/etc"}}, CONTAINER_CREATE,
     "HostConfig.Binds must be a list"),
    ({"Image": "x", "HostConfig": []}, CONTAINER_CREATE, "HostConfig must be an object"),
    ({"Image": ["x"]}, CONTAINER_CREATE, "Image must be a string, number or boolean"),
    ({"Image": "x", "StopTimeout": float("inf")}, CONTAINER_CREATE,
     "StopTimeout must be a finite number"),
    ({"Name": "v", "DriverOpts": {"device": "/"}}, VOLUME_CREATE,
     "DriverOpts is refused: volume and network driver options are refused (they can mount"
     " host paths)"),
    ({"Name": "n", "IPAM": {"Options": {"a": "b"}}}, NETWORK_CREATE,
     "IPAM.Options is refused: driver options are refused"),
    ({"Cmd": ["sh"], "privileged": True}, EXEC_CREATE,
     "key 'privileged' is refused: the API spells it 'Privileged'"),
])
def test_rebuilt_refuses_keys_the_schema_does_not_take(
    body: dict[str, Any], schema: Any, reason: str
) -> None:
    with pytest.raises(BodyRefused) as refused:
        rebuilt(body, schema)

    assert str(refused.value) == reason


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(BodyRefused, match="the JSON body must be an object"):
        rebuilt(["Image", "python"], CONTAINER_CREATE)


def test_empty_values_of_must_be_empty_fields_are_dropped_and_maps_keep_their_keys() -> None:
    body = {"Name": "cache", "Driver": "local", "DriverOpts": {}, "Labels": {"Any Key": "v"}}

    assert rebuilt(body, VOLUME_CREATE) == {"Name": "cache", "Driver": "local",
                                            "Labels": {"Any Key": "v"}}
