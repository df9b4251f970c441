"""The leftover check of `runner audit`: what a job made past the filter is gone after the reset.

A job that reached its slot's engine (the engine's socket, past the filter) makes what the
filter would have labelled, unlabelled: a container that restarts always, a volume, a network.
The slot is then reset as between two jobs (slot_reset.py), and the engine is asked for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from repro_gate.runner.audit.engine import Blocked, Engine, Finding, Outcome
from repro_gate.runner.slot_reset import ResetReport

# A busy loop of the shell's builtins only (the audit image may have no `sleep`): it runs until
# the reset ends it.
LOOP = ["/bin/sh", "-c", "while :; do :; done"]


def leftovers(engine_socket: Path, image: str, prefix: str,
              reset: Callable[[], ResetReport]) -> Finding:
    """Make an unlabelled `restart: always` container, a volume and a network on the engine
    itself, reset the slot, and look for them; ESCAPED when anything survived."""
    try:
        return _made_then_reset(Engine(engine_socket), image, prefix, reset)
    except Blocked as blocked:  # the engine refused to make them: nothing to survive
        return blocked.finding


def _made_then_reset(engine: Engine, image: str, prefix: str,
                     reset: Callable[[], ResetReport]) -> Finding:
    names = {"container": f"{prefix}leftover", "volume": f"{prefix}leftover",
             "network": f"{prefix}leftover"}
    container = engine.create(names["container"], {
        "Image": image, "Cmd": LOOP,
        "HostConfig": {"NetworkMode": "none", "RestartPolicy": {"Name": "always"}}})
    engine.start(container)
    engine.must("volume create", "POST", "/volumes/create", {"Name": names["volume"]})
    engine.must("network create", "POST", "/networks/create", {"Name": names["network"]})
    report = reset()
    found = [what for what, path in (("container", f"/containers/{container}/json"),
                                     ("volume", f"/volumes/{names['volume']}"),
                                     ("network", f"/networks/{names['network']}"))
             if engine.request("GET", path).ok]
    if found or not report.fresh:
        survived = ", ".join([*found, *report.survivors])
        return Finding(Outcome.ESCAPED, f"survived the reset: {survived}")
    listed = json.loads(engine.must("list", "GET", "/containers/json?all=1").body)
    if listed:
        return Finding(Outcome.ESCAPED, f"the engine lists {len(listed)} container(s) after"
                                        " the reset")
    return Finding(Outcome.NO_EFFECT, f"none survived the reset ({report.seconds:.1f} s)")
