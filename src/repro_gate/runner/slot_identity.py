"""Who a slot's engine runs as: an unprivileged user of its own, with its own subordinate IDs.

The user and the ID range are derived from the slot (defaults in runner_config.py), so a config
with only the slots listed needs nothing more. `repro-gate runner setup` creates them;
the service and `slot-endpoint` only look them up and refuse, in one line, what is missing.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass

from repro_gate.errors import ConfigError
from repro_gate.runner.runner_config import SUBORDINATE_ID_COUNT, RunnerConfig
from repro_gate.runner.slot_folders import Owner
from repro_gate.runner.slots import Slot

# The slot's group (its GPU node's group, host_setup.py) is group 0 inside every container of
# the slot's engine: a container user that is not root reaches the GPU through it.
GPU_GROUPS = ("0",)
SETUP_HINT = "run `repro-gate runner setup --config <runner.yml>` as root first"


@dataclass(frozen=True)
class SlotIdentity:
    user: str
    subordinate_first: int  # the first subordinate user and group ID
    subordinate_count: int = SUBORDINATE_ID_COUNT

    @classmethod
    def of(cls, config: RunnerConfig, slot: Slot) -> SlotIdentity:
        prefix = config.isolation.user_prefix or f"{config.name_prefix}-slot"
        first = config.isolation.subordinate_id_base + slot.index * SUBORDINATE_ID_COUNT
        return cls(f"{prefix}{slot.index}", first)

    @property
    def subordinate_last(self) -> int:
        return self.subordinate_first + self.subordinate_count - 1

    def owner(self) -> Owner:
        """The user's uid and gid; ConfigError when setup has not created it."""
        try:
            entry = pwd.getpwnam(self.user)
        except KeyError:
            raise ConfigError(f"slot user {self.user} does not exist: {SETUP_HINT}") from None
        if entry.pw_uid == 0:
            raise ConfigError(f"slot user {self.user} is root: a slot needs an unprivileged user")
        return Owner(entry.pw_uid, entry.pw_gid)
