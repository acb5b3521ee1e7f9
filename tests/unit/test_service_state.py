"""The InferenceService's carried state reads what running executions carried before.

Continue-as-new hands `ServiceState` as JSON to the next run; a run started by older code
carries `paused` beside `pause`, and `forwards` as `[component, signal, {"value": ...}]`.
"""

from __future__ import annotations

from typing import Any

import pytest

from planning.service.pause import PauseMode
from workflows.service.messages import Forward, ServiceState

MANIFEST: dict[str, Any] = {"metadata": {"name": "chat", "namespace": "ns"}, "spec": {}}


@pytest.mark.parametrize(
    ("carried", "pause"),
    [
        ({"paused": False, "pause": None}, None),
        ({"paused": True}, PauseMode.RECOVER),
        ({"paused": True, "pause": None}, PauseMode.RECOVER),
        ({"paused": True, "pause": "true"}, PauseMode.RECOVER),
        ({"paused": True, "pause": "freeze"}, PauseMode.FREEZE),
        ({"paused": False, "pause": "freeze"}, None),
        ({"pause": "freeze"}, PauseMode.FREEZE),
        ({}, None),
    ],
)
def test_old_pause_fields_read_as_one_depth(carried: dict[str, Any], pause: PauseMode | None) -> None:
    state = ServiceState.model_validate({"manifest": MANIFEST, **carried})
    assert state.pause == pause
    assert state.paused == (pause is not None)
    assert "paused" not in state.model_dump(mode="json")


def test_old_forward_tuples_read_as_forwards() -> None:
    carried = {
        "manifest": MANIFEST,
        "forwards": [
            ["engine", "release_held", {"value": "chat-engine-7c9e1a2b"}],
            ["engine", "reset_instances", {"value": "0,2"}],
        ],
    }
    state = ServiceState.model_validate(carried)
    assert state.forwards == [
        Forward(component="engine", signal="release_held", value="chat-engine-7c9e1a2b"),
        Forward(component="engine", signal="reset_instances", value="0,2"),
    ]


def test_state_survives_its_own_round_trip() -> None:
    state = ServiceState(
        manifest=MANIFEST,
        pause=PauseMode.FREEZE,
        forwards=[Forward(component="engine", signal="release_held", value="abc12345")],
    )
    assert ServiceState.model_validate(state.model_dump(mode="json")) == state
