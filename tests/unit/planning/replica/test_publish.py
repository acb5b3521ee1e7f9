"""Status write pacing of the InferenceReplica (planning.replica.publish)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.inferencereplica import Condition
from planning.replica.publish import condition_key, decide_publish, interval_for

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("instances", "seconds"),
    [(1, 0.0), (19, 0.0), (20, 0.1), (200, 1.0), (1000, 5.0), (2000, 10.0), (50000, 10.0)],
)
def test_interval_grows_with_the_component_and_is_capped(instances: int, seconds: float) -> None:
    assert interval_for(instances) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("changed", "urgent", "last", "instances", "write", "wake"),
    [
        # nothing new: nothing to write, nothing to wait for
        (False, False, NOW - timedelta(seconds=30), 2000, False, None),
        (False, True, None, 2000, False, None),
        # the first write, and an urgent one, go at once whatever the size
        (True, False, None, 2000, True, None),
        (True, True, NOW - timedelta(milliseconds=1), 2000, True, None),
        # small components write every change
        (True, False, NOW - timedelta(milliseconds=1), 5, True, None),
        # a large one holds a count-only change back until the interval has passed
        (True, False, NOW - timedelta(seconds=4), 2000, False, NOW + timedelta(seconds=6)),
        (True, False, NOW - timedelta(seconds=10), 2000, True, None),
        (True, False, NOW - timedelta(milliseconds=400), 200, False, NOW + timedelta(milliseconds=600)),
    ],
)
def test_decide_publish(
    changed: bool, urgent: bool, last: datetime | None, instances: int, write: bool, wake: datetime | None
) -> None:
    decision = decide_publish(
        changed=changed, urgent=urgent, last_written_at=last, instances=instances, now=NOW
    )
    assert (decision.write, decision.wake_at) == (write, wake)


def test_condition_key_ignores_messages_and_times_but_not_reasons() -> None:
    ready = Condition(type="Ready", status="True", reason="AllInstancesReady", message="3/3 Instances Ready")
    later = ready.model_copy(update={"message": "4/4 Instances Ready", "last_transition_time": NOW})
    assert condition_key([ready]) == condition_key([later])
    rollout = ready.model_copy(update={"status": "Unknown", "reason": "RolloutInProgress"})
    assert condition_key([ready]) != condition_key([rollout])
