"""Which containers belong to the slot: those carrying its label, which the proxy puts on.

Every container created through a slot's proxy gets `org.repro-gate.slot=<the slot's GPU UUID>`
(the service gives its runner container the same label). A request that names a container,
directly or inside a create body (`--volumes-from`, `--pid container:…`), is passed only for
the slot's own: exec into another slot's runner would reach that slot's GPU. Listings and the
event stream are narrowed to the slot's label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from repro_gate.runner.docker_policy import Caseless, SlotPolicy

SLOT_LABEL = "org.repro-gate.slot"
SHARED_MODES = ("NetworkMode", "PidMode", "IpcMode")


def labelled(body: Mapping[str, Any], policy: SlotPolicy) -> dict[str, Any]:
    """The create body with the slot's label set (a label the job chose is overwritten)."""
    labels: dict[str, Any] = {}
    rest = {}
    for key, value in body.items():
        if key.casefold() == "labels":  # the daemon reads any spelling of the key
            labels.update(value if isinstance(value, Mapping) else {})
        else:
            rest[key] = value
    return {**rest, "Labels": {**labels, SLOT_LABEL: policy.gpu_uuid}}


def referenced_containers(body: Mapping[str, Any]) -> list[str]:
    """Containers a body names: volumes-from, `container:` namespace modes, network connect.

    The body has passed its rules, so its keys are unambiguous; host settings are read from
    `HostConfig` and from the top level, as the daemon may (see check_create).
    """
    view = Caseless(body)
    names = [str(view["Container"])] if view.get("Container") else []
    for host in (view.get("HostConfig"), view):
        if not isinstance(host, Mapping):
            continue
        names += [str(entry).split(":", 1)[0] for entry in host.get("VolumesFrom") or []]
        for key in SHARED_MODES:
            mode = str(host.get(key) or "")
            if mode.startswith("container:"):
                names.append(mode.removeprefix("container:"))
    return names


def is_owned(container: Mapping[str, Any], policy: SlotPolicy) -> bool:
    """Whether an inspected container carries this slot's label."""
    labels = (container.get("Config") or {}).get("Labels") or {}
    return bool(labels.get(SLOT_LABEL) == policy.gpu_uuid)


def scoped(target: str, policy: SlotPolicy) -> str:
    """The request target with its `filters` narrowed to the slot's label (list, events)."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    filters: dict[str, Any] = {}
    for name, value in query:
        if name == "filters" and value:
            filters = json.loads(value)
    wanted = f"{SLOT_LABEL}={policy.gpu_uuid}"
    labels = filters.get("label", [])
    # The daemon takes both `["k=v"]` and the older `{"k=v": true}`.
    filters["label"] = {**labels, wanted: True} if isinstance(labels, dict) else [*labels, wanted]
    query = [(name, value) for name, value in query if name != "filters"]
    query.append(("filters", json.dumps(filters)))
    return urlunsplit(parts._replace(query=urlencode(query)))
