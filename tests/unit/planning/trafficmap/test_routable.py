"""§17's `Routable` reasons in their order."""

from __future__ import annotations

import pytest

from planning.trafficmap.probes import ProbePolicy
from planning.trafficmap.routable import Home, routable

pytestmark = pytest.mark.unit

DRAIN = ProbePolicy(frozenset({200}), frozenset({503}), 2, 2, "Drain")
PRESERVE = ProbePolicy(frozenset({200}), frozenset({503}), 2, 2, "PreserveTraffic")
EP = "https://a.example"


@pytest.mark.parametrize(
    ("homes", "probe", "reason", "status"),
    [
        pytest.param([], None, "NotPlaced", "False", id="no home"),
        pytest.param([Home("a", None, 2, 0)], None, "NoAddressableHome", "False", id="no endpoint"),
        pytest.param([Home("a", EP, 2, 1, gated=True)], DRAIN, "AllHomesProbeFailed", "False", id="all gated, Drain"),
        pytest.param([Home("a", EP, 2, 1, gated=True)], PRESERVE, "AllHomesProbeFailed", "True",
                     id="all gated, PreserveTraffic"),
        pytest.param([Home("a", EP, 0, 0), Home("b", EP, 0, 0)], None, "AllHomesUnready", "False", id="nothing ready"),
        pytest.param([Home("a", EP, 2, 0, drained=True)], None, "TrafficDrain", "False", id="drained"),
        pytest.param([Home("a", EP, 2, 0)], None, "NoRoutableCapacity", "False", id="ready but weight 0"),
        pytest.param([Home("a", EP, 2, 2), Home("b", EP, 2, 0, drained=True)], None, "Routable", "True",
                     id="one home serves"),
        pytest.param([Home("a", EP, 2, 1, gated=False), Home("b", EP, 2, 0, gated=True)], DRAIN, "Routable", "True",
                     id="one gated of two"),
    ],
)
def test_routable(homes: list[Home], probe: ProbePolicy | None, reason: str, status: str) -> None:
    assert routable(homes, probe)[:2] == (status, reason)
