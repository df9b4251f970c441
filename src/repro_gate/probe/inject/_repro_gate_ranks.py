"""Which rank a process is, and how many there are."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# Set by torchrun (and by hand for other launchers); torch.distributed, when initialised, wins.
RANK_VARIABLES = ("RANK", "LOCAL_RANK")
WORLD_SIZE_VARIABLE = "WORLD_SIZE"


def rank_and_world_size(torch: Any, on_error: Callable[[str], None]) -> tuple[int, int]:
    """This process's rank and world size; rank 0 of 1 without a process group or variables."""
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception as error:
        on_error(f"reading the rank from torch.distributed: {error!r}")
    rank = next((os.environ[n] for n in RANK_VARIABLES if os.environ.get(n)), None)
    world_size = os.environ.get(WORLD_SIZE_VARIABLE)
    try:
        return int(rank or 0), int(world_size or 1)
    except ValueError:
        on_error(f"rank {rank!r} or world size {world_size!r} is not an integer")
        return 0, 1
