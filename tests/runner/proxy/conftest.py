"""The slot policy the filter's body tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.slot_policies import socket_policy as socket_policy_in

from repro_gate.runner.proxy.policy import SlotPolicy


@pytest.fixture
def socket_policy(tmp_path: Path) -> SlotPolicy:
    """A slot whose proxy socket lies beside its work folder, as the service lays them out."""
    return socket_policy_in(tmp_path)
