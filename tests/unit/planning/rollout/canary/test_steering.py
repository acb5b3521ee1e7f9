"""Promote, rollback, retry, pause and resume: accepted or the reference's refusal (§3, §5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.rollout.canary import steering, texts
from planning.rollout.canary.state import CanaryState, Failure
from tests.unit.planning.rollout.canary.rows import (
    FULL,
    analysis,
    at,
    canary_of,
    entered,
    fresh,
    go,
    observe,
    ready_for,
    with_promote,
    with_rollback,
)

pytestmark = pytest.mark.unit

MANUAL = canary_of({"capacity": "25%", "traffic": 10, "pause": {}}, {**FULL, "pause": {}})
TIMED = canary_of({"capacity": "25%", "traffic": 10, "pause": {"duration": "5m"}}, FULL)
IMMEDIATE = canary_of({"capacity": "25%", "traffic": 10}, FULL)
ANALYSIS = canary_of({"capacity": "25%", "traffic": 10, "analysis": analysis()}, FULL)
AT_MANUAL = entered(MANUAL, 0, at(0))
ANALYSIS_ROLLED_BACK = replace(AT_MANUAL, phase="RolledBack", rollback_cause="analysis")


@pytest.mark.parametrize(
    "canary, state, override, paused, groups, expected",
    [
        (MANUAL, AT_MANUAL, False, False, 1, None),
        (MANUAL, entered(MANUAL, 1, at(0)), False, False, 1, None),  # the last step waits in Paused
        (ANALYSIS, entered(ANALYSIS, 0, at(0)), True, False, 1, None),
        (MANUAL, AT_MANUAL, True, False, 1, texts.REFUSED_GATE),
        (ANALYSIS, entered(ANALYSIS, 0, at(0)), False, False, 1, texts.REFUSED_GATE),
        (TIMED, entered(TIMED, 0, at(0)), False, False, 1, texts.REFUSED_GATE),
        (
            IMMEDIATE,
            replace(entered(IMMEDIATE, 0, at(0)), phase="Canarying"),
            False,
            False,
            1,
            texts.REFUSED_GATE,
        ),
        (MANUAL, fresh(), False, False, 1, texts.REFUSED_GATE),  # Pending: no stepEnteredTime
        (
            MANUAL,
            replace(AT_MANUAL, phase="Failed", failed=Failure("CapacityTimeout", at(1))),
            False,
            False,
            1,
            texts.REFUSED_GATE,
        ),
        (ANALYSIS, replace(entered(ANALYSIS, 0, at(0)), phase="Failed"), True, False, 1, texts.REFUSED_GATE),
        (MANUAL, replace(entered(MANUAL, 1, at(0)), phase="Promoting"), False, False, 1, texts.REFUSED_GATE),
        (MANUAL, AT_MANUAL, False, True, 1, texts.REFUSED_PAUSED),
        (MANUAL, with_promote(AT_MANUAL), False, False, 1, texts.REFUSED_MAILBOX),
        (MANUAL, with_rollback(AT_MANUAL), False, False, 1, texts.REFUSED_MAILBOX),
        (MANUAL, ANALYSIS_ROLLED_BACK, False, False, 1, texts.REFUSED_NO_WORK),
        (MANUAL, replace(AT_MANUAL, phase="Stable"), False, False, 1, texts.REFUSED_NO_WORK),
        (MANUAL, None, False, False, 1, texts.REFUSED_NO_WORK),
        (MANUAL, AT_MANUAL, False, False, 2, texts.REFUSED_STALE),
    ],
    ids=[
        "manual gate",
        "manual gate of the last step",
        "override at an analysis gate",
        "override at a manual gate",
        "plain promote at an analysis gate",
        "timed never",
        "immediate never",
        "pending",
        "failed",
        "failed refuses the override too",
        "promoting",
        "globally paused",
        "previous promote not consumed",
        "rollback mailbox present",
        "after an analysis rollback",
        "completed",
        "no canary",
        "two canary groups",
    ],
)
def test_promote(
    canary: object, state: CanaryState | None, override: bool, paused: bool, groups: int, expected: str | None
) -> None:
    found = steering.promote(canary, state, None, override, "p9", paused, groups)  # type: ignore[arg-type]
    if expected is None:
        assert found.accepted and found.state is not None
        promote = found.state.mailbox.promote
        assert promote is not None and (promote.revision, promote.override_analysis) == ("e2", override)
        assert found.message.startswith("Analysis override:") == override
    else:
        assert (found.accepted, found.message, found.state) == (False, expected, state)


def test_a_promote_naming_another_revision_is_refused() -> None:
    found = steering.promote(MANUAL, AT_MANUAL, "e0")
    assert not found.accepted and found.message == texts.refused_revision("e0", "e2")


@pytest.mark.parametrize(
    "revision, accepted",
    [("e2", True), (None, False)],
    ids=["naming the canary hash releases", "without the hash refused"],
)
def test_promote_during_a_pre_step_hold_needs_the_canary_hash(revision: str | None, accepted: bool) -> None:
    held = replace(fresh(), pre_step_hold=True, phase="Paused")
    found = steering.promote(MANUAL, held, revision)
    assert found.accepted is accepted
    if not accepted:
        assert found.message == texts.refused_pre_step("e2")


@pytest.mark.parametrize(
    "state, paused, expected",
    [
        (fresh(), False, None),
        (AT_MANUAL, False, None),
        (replace(AT_MANUAL, phase="Canarying"), False, None),
        (replace(AT_MANUAL, phase="Promoting"), False, None),
        (replace(AT_MANUAL, phase="Failed"), False, None),
        (replace(AT_MANUAL, phase="Stable"), False, texts.REFUSED_NO_WORK),
        (replace(AT_MANUAL, phase="RollingBack", rollback_cause="analysis"), False, texts.REFUSED_NO_WORK),
        (ANALYSIS_ROLLED_BACK, False, texts.REFUSED_NO_WORK),
        (with_rollback(replace(AT_MANUAL, phase="RolledBack")), False, texts.REFUSED_MAILBOX),
        (with_promote(AT_MANUAL), False, texts.REFUSED_MAILBOX),
        (AT_MANUAL, True, texts.REFUSED_PAUSED),
        (None, False, texts.REFUSED_NO_WORK),
    ],
    ids=[
        "pending",
        "paused at a gate",
        "canarying",
        "promoting",
        "failed",
        "completed",
        "rolling back after analysis",
        "rolled back after analysis",
        "manual rollback lingers",
        "promote pending",
        "globally paused",
        "no canary",
    ],
)
def test_rollback(state: CanaryState | None, paused: bool, expected: str | None) -> None:
    found = steering.rollback(state, "r1", paused)
    if expected is None:
        assert found.accepted and found.state is not None and found.state.mailbox.rollback is not None
    else:
        assert (found.accepted, found.message) == (False, expected)


def test_after_an_analysis_rollback_promote_and_rollback_find_no_work() -> None:
    failing = replace(entered(ANALYSIS, 0, at(0)), analysis_failed_checks=2)
    rolled = go(ANALYSIS, failing, observe(ready_for(ANALYSIS, 0)), 10).state
    assert rolled.phase == "RollingBack" and rolled.mailbox.rollback is None
    assert steering.promote(ANALYSIS, rolled, None, True).message == texts.REFUSED_NO_WORK
    assert steering.rollback(rolled).message == texts.REFUSED_NO_WORK


@pytest.mark.parametrize(
    "phase, revision, expected",
    [
        ("Failed", None, None),
        ("RolledBack", "d2", None),
        ("Failed", "x9", texts.refused_revision("x9", "e2")),
        ("RollingBack", None, texts.REFUSED_NO_WORK),
        ("Paused", None, texts.REFUSED_NO_WORK),
        ("Stable", None, texts.REFUSED_NO_WORK),
    ],
    ids=[
        "failed",
        "rolled back, the decoder's hash",
        "unknown hash",
        "in-progress rollback",
        "running",
        "completed",
    ],
)
def test_retry(phase: str, revision: str | None, expected: str | None) -> None:
    found = steering.retry(replace(AT_MANUAL, phase=phase), revision, paused=True)  # type: ignore[arg-type]
    if expected is None:
        assert found.accepted and found.message.endswith("once the pause is lifted")
    else:
        assert (found.accepted, found.message) == (False, expected)


@pytest.mark.parametrize(
    "state, paused, discard, expected",
    [
        (AT_MANUAL, False, False, None),
        (AT_MANUAL, True, False, texts.REFUSED_ALREADY_PAUSED),
        (replace(AT_MANUAL, phase="Stable"), False, False, texts.REFUSED_NO_WORK),
        (None, False, False, texts.REFUSED_NO_WORK),
        (with_promote(AT_MANUAL), False, False, texts.REFUSED_MAILBOX),
        (with_promote(AT_MANUAL), False, True, None),
    ],
    ids=[
        "active canary",
        "already paused",
        "nothing active",
        "no canary",
        "mailbox present",
        "mailbox discarded",
    ],
)
def test_pause(state: CanaryState | None, paused: bool, discard: bool, expected: str | None) -> None:
    found = steering.pause(state, paused, discard)
    if expected is None:
        assert found.accepted and found.state is not None and not found.state.mailbox.blocks
    else:
        assert (found.accepted, found.message) == (False, expected)


def test_resume_needs_a_pause() -> None:
    assert steering.resume(AT_MANUAL, paused=False).message == texts.REFUSED_NOT_PAUSED
    assert steering.resume(AT_MANUAL, paused=True).accepted


def test_a_refused_signal_becomes_a_warning_event() -> None:
    event = steering.refusal_event(texts.REFUSED_PAUSED)
    assert (event.type, event.reason, event.message) == (
        "Warning",
        texts.REQUEST_REJECTED,
        texts.REFUSED_PAUSED,
    )
