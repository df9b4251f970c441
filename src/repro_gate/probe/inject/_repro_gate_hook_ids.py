"""The probe's hook handles are numbered apart from the training's.

torch numbers every hook handle from one class-wide counter (`RemovableHandle.next_id`), and a
module's hook tables are keyed by these numbers, which `torch.save(model)` and pickle write. Were
the probe to take numbers from that counter, each hook the training registers afterwards would
get another number than without the probe, and a model saved whole other bytes. So the probe's
handles take numbers from a range of their own, far above any the training reaches, and the
counter is put back. The ranges never meet, which matters: torch looks a module's hook up by
number in the global tables too (`with_kwargs`, `always_call`).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

FIRST_PROBE_ID = 1 << 62
_next_probe_id = FIRST_PROBE_ID


@contextlib.contextmanager
def probe_hook_ids() -> Iterator[None]:
    """Hooks registered inside get the probe's numbers; the training's counter is untouched."""
    global _next_probe_id
    handles = importlib.import_module("torch.utils.hooks").RemovableHandle
    saved = handles.next_id
    handles.next_id = _next_probe_id
    try:
        yield
    finally:
        _next_probe_id = handles.next_id
        handles.next_id = saved


def register_optimizer_step_hooks(before: Callable[..., Any], after: Callable[..., Any]) -> None:
    """The probe's global optimizer step pre- and post-hooks, numbered as the probe's."""
    optimizers = importlib.import_module("torch.optim.optimizer")
    with probe_hook_ids():
        optimizers.register_optimizer_step_pre_hook(before)
        optimizers.register_optimizer_step_post_hook(after)
