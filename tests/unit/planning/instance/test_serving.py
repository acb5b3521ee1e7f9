"""Which Instances create their pods with the serving gate (`planning.instance.serving`)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.instance.serving import message, serves_when_ready
from tests.unit.planning.instance.test_pods import gang, spec


@pytest.mark.parametrize(
    ("fields", "draining", "expected"),
    [
        pytest.param({}, False, True, id="one pod, no minReadySeconds: serves once ready"),
        pytest.param({}, True, False, id="draining: never into rotation"),
        pytest.param({"min_ready_seconds": 30.0}, False, False, id="minReadySeconds: must stay ready first"),
        pytest.param({"gang": True}, False, False, id="leader and workers: the leader waits for its workers"),
    ],
)
def test_serves_when_ready(fields: dict[str, Any], draining: bool, expected: bool) -> None:
    made = gang() if fields.get("gang") else spec(**fields)
    assert serves_when_ready(made, draining) is expected


def test_message_names_the_instance() -> None:
    assert message(spec()) == "Instance chat-engine-1 has one pod and no minReadySeconds: it serves once ready"
