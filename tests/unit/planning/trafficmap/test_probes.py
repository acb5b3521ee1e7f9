"""§19 probe gates as tables: attempt results, thresholds, Unknown leaving the state alone,
all homes failed under both policies, and the settings' refusals."""

from __future__ import annotations

import pytest

from planning.trafficmap.probes import ProbePolicy, ProbeState, all_failed, classify, record

pytestmark = pytest.mark.unit

POLICY = ProbePolicy(frozenset({200}), frozenset({500, 503}), failure_threshold=2, success_threshold=2)


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        pytest.param(200, None, ("Passing", "HTTP 200"), id="accepted"),
        pytest.param(503, None, ("Failing", "HTTP 503"), id="a gate status"),
        pytest.param(301, None, ("Unknown", "HTTP 301 (not in accept or gate list)"), id="neither"),
        pytest.param(None, "dial tcp: connection refused", ("Failing", "transport error: dial tcp: connection refused"),
                     id="transport error"),
    ],
)
def test_classify(status: int | None, error: str | None, expected: tuple[str, str]) -> None:
    assert classify(status, error, POLICY) == expected


def run(*attempts: int) -> ProbeState:
    state = ProbeState()
    for status in attempts:
        state = record(state, *classify(status, None, POLICY), POLICY)
    return state


@pytest.mark.parametrize(
    ("attempts", "gated"),
    [
        pytest.param((503,), False, id="one failure is not enough"),
        pytest.param((503, 503), True, id="failureThreshold consecutive failures gate"),
        pytest.param((503, 200, 503), False, id="a pass resets the failures"),
        pytest.param((503, 503, 200), True, id="one pass does not lift the gate"),
        pytest.param((503, 503, 200, 200), False, id="successThreshold passes lift it"),
        pytest.param((503, 503, 301, 301), True, id="Unknown leaves the gate"),
        pytest.param((503, 301, 503), True, id="Unknown leaves the counters too"),
    ],
)
def test_gate(attempts: tuple[int, ...], gated: bool) -> None:
    assert run(*attempts).gated is gated


def test_all_homes_failed() -> None:
    assert all_failed([True, False], POLICY) is None
    assert all_failed([True, True], POLICY) == (
        "False", "AllHomesProbeFailed", "2 home(s) have conclusive probe failures; all route weights are zero"
    )
    preserve = ProbePolicy(POLICY.accept_statuses, POLICY.gate_statuses, 2, 2, "PreserveTraffic")
    assert all_failed([True, True], preserve) == (
        "True",
        "AllHomesProbeFailed",
        "2 home(s) have conclusive probe failures; preserving traffic among homes with ready capacity",
    )


def test_settings_refusals() -> None:
    assert POLICY.problems() == []
    bad = ProbePolicy(frozenset({200, 503}), frozenset({503, 429}), 1, 1)
    assert bad.problems() == [
        "validate routing policy: spec.routing.probe status 503 is in both acceptStatuses and gateStatuses",
        "validate routing policy: spec.routing.probe gateStatuses must not contain 429",
    ]
