"""The keys of container runs."""

from __future__ import annotations

from repro_gate.config.keys.base import CONTAINER, ConfigKey, Kind

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("image", Kind.TEXT, "training image, ideally pinned: name@sha256:…",
              ("--image",), group=CONTAINER, action_input="image",
              doc="training image for container runs, ideally `name@sha256:…`",
              doc_default="none (local runs)",
              input_description="Training image, pinned by digest (registry/name@sha256:...). The"
                                " runs are sibling containers of this image on the runner's"
                                " Docker daemon. Empty: the config file's image.",
              input_doc="Training image. Pin it by digest (`registry/name@sha256:…`): a tag can"
                        " move between two runs and make the gate compare two different images."
                        " Without it the training runs in the action's own image, which has no"
                        " torch: a Python training (a command starting with `python`, `python3`"
                        " or `pythonX.Y`, or the reference training) is refused before any run,"
                        " in one line, when `python -c \"import torch\"` fails there (reason"
                        " `image_required`, exit 2)."),
    ConfigKey("gpus", Kind.GPUS, "'all', 'none', a count, or comma-separated IDs/UUIDs",
              ("--gpus",), group=CONTAINER, action_input="gpus",
              doc="`all`, `none`, a count, or device IDs/UUIDs",
              input_description="GPUs for the training container: all, none, a count, or"
                                " comma-separated device IDs or UUIDs. Empty: REPRO_GATE_GPUS"
                                " (set by a repro-gate runner slot), else the config file's"
                                " value, else all. Needs the NVIDIA Container Toolkit.",
              input_doc="`all`, `none`, a count, or comma-separated device IDs/UUIDs (`0,1`,"
                        " `GPU-8f2a…`). Default: the config's value, else `all`."),
    ConfigKey("network", Kind.TEXT, "container network (default {default})", ("--network",),
              group=CONTAINER, action_input="network",
              doc="container network (opt-in)",
              input_description="Docker network of the training container. Empty: the config"
                                " file's value, else none (the training cannot reach any"
                                " network). Name a network only for trainings that must download.",
              input_doc="Docker network of the training container. Default `none`."),
    ConfigKey("container.memory", Kind.TEXT, "container memory limit, e.g. 16g", ("--memory",),
              group=CONTAINER,
              doc="container limits and behaviour"),
    ConfigKey("container.pids", Kind.INTEGER, "container pids limit", ("--pids",),
              group=CONTAINER,
              shares_row=True),
    ConfigKey("container.user", Kind.TEXT, "uid:gid the training runs as", ("--user",),
              group=CONTAINER,
              doc_default="the workspace owner (nobody for root)",
              shares_row=True),
    ConfigKey("container.keep", Kind.BOOLEAN, "keep containers after the run", ("--keep",),
              group=CONTAINER,
              shares_row=True),
    ConfigKey("container.env_allow", Kind.LIST,
              "host variable passed into the container (repeatable)", ("--env-allow",),
              group=CONTAINER, metavar="NAME",
              shares_row=True),
)
