"""The gates `status.rolloutHold` may show are exactly the gates the planning decides."""

from __future__ import annotations

from typing import get_args

import pytest

from models.inferencereplica import HoldGate as ShownGate
from models.inferencereplica import RolloutHoldRow
from planning.replica.hold import HoldGate

pytestmark = pytest.mark.unit


def test_every_planned_gate_is_a_gate_status_can_show() -> None:
    assert set(get_args(ShownGate)) == {gate.value for gate in HoldGate}


@pytest.mark.parametrize("gate", [gate.value for gate in HoldGate])
def test_a_hold_of_each_gate_reads_back(gate: str) -> None:
    row = RolloutHoldRow.model_validate({"gate": gate, "reason": "why", "target": "rev"})
    assert row.model_dump(by_alias=True, mode="json")["gate"] == gate
