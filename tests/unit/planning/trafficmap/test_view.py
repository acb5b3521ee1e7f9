"""What `status` answers and the UI shows: the table, why a home stands where it does, the
drains by source, and whether the route can be trusted."""

from __future__ import annotations

import pytest

from models.trafficmap import EntryCapacity, EntryProbe, TrafficMapEntry, TrafficMapSpec
from planning.trafficmap.drains import Drain
from planning.trafficmap.state import Publication, TrafficMapState
from planning.trafficmap.view import view_of

pytestmark = pytest.mark.unit


def test_the_view_explains_each_weight() -> None:
    spec = TrafficMapSpec(service="chat", observed_isvc_generation=6, entries=[
        TrafficMapEntry(cluster="worker-a", weight=0, healthy=True, drain_refs=["maint"],
                        capacity=EntryCapacity(allocated=4, ready=4)),
        TrafficMapEntry(cluster="worker-b", weight=0, capacity=EntryCapacity(allocated=2, ready=2, factor="3"),
                        probe=EntryProbe(result="Failing", message="HTTP 503", gated=True, consecutive_failures=2)),
        TrafficMapEntry(cluster="worker-c", weight=1, healthy=True,
                        capacity=EntryCapacity(allocated=1, ready=2, fallback_reason="no capacity report yet")),
    ])
    state = TrafficMapState(namespace="prod", isvc="chat", spec=spec, drains={"maint": Drain(cluster="worker-a")},
                            map_generation=3, publication=Publication(reason="Published", published=True,
                                                                      observed_generation=3))
    view = view_of(state, {"ann": Drain(cluster="worker-c", reason="r")}, [])
    assert view.weights == {"worker-a": 0, "worker-b": 0, "worker-c": 1}
    assert [(d.id, d.source) for d in view.drains] == [("ann", "annotation"), ("maint", "message")]
    assert view.message.splitlines()[1:] == [
        "- worker-a: weight 0 (allocated 4, ready 4, factor 1); drained by maint",
        "- worker-b: weight 0 (allocated 2, ready 2, factor 3); probe gated (HTTP 503)",
        "- worker-c: weight 1 (allocated 1, ready 2, factor 1); capacity: no capacity report yet",
    ]
    # Published for this generation, but no gateway has accepted the route yet.
    assert not view.publication_current and "Accepted" in view.publication_note


def test_a_stopped_map_says_so_first() -> None:
    state = TrafficMapState(namespace="prod", isvc="chat", errors=["validate routing policy: x"])
    assert view_of(state, {}, []).message.splitlines()[1] == "STOPPED (last table kept): validate routing policy: x"
