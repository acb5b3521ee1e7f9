"""Phases, readiness clock, retry block, update strategy, force delete and event texts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.instance import (
    ForceDeletePolicy,
    InstancePhase,
    InstanceSpec,
    RetryBlockState,
    UpdateRetryPolicy,
    UpdateStrategyType,
)
from models.pods import PodSummary
from planning.instance.rules import (
    ReadinessClock,
    UpdateWay,
    blocks_attempt,
    check_transition,
    choose_update_way,
    delete_blocked_by_finalizer_message,
    drain_deadline,
    drain_overdue_message,
    finalizer_block_evidence,
    force_delete_due_at,
    force_delete_evidence,
    in_place_refused_message,
    keeps_failed_attempt,
    next_ordinal,
    pod_group_recheck_seconds,
    pod_group_taken_message,
    rebuild_delay_seconds,
    record_counting_failure,
    release_matches,
    retry_due,
    retry_held_message,
    service_recheck_seconds,
    start_retry,
)

pytestmark = pytest.mark.unit
P = InstancePhase
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def spec(**overrides: Any) -> InstanceSpec:
    values: dict[str, Any] = {
        "namespace": "ns",
        "isvc": "chat",
        "component": "engine",
        "index": 0,
        "revision": "7c9e1a2b3c",
        "revision_name": "chat-engine-7c9e1a2b3c",
        "leader_pod_spec": {"containers": [{"name": "e", "image": "i:1"}]},
    }
    values.update(overrides)
    return InstanceSpec(**values)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (P.CREATING, P.READY),
        (P.CREATING, P.FAILED),
        (P.READY, P.UPDATING),
        (P.READY, P.RESTARTING),
        (P.READY, P.MIGRATING),
        (P.READY, P.DELETING),
        (P.READY, P.PENDING),
        (P.UPDATING, P.READY),
        (P.UPDATING, P.FAILED),
        (P.RESTARTING, P.READY),
        (P.RESTARTING, P.FAILED),
        (P.PENDING, P.CREATING),
        (P.FAILED, P.CREATING),
        (P.FAILED, P.READY),
        (P.FAILED, P.UPDATING),
        (P.FAILED, P.DELETING),
        (P.READY, P.READY),
    ],
)
def test_allowed_transitions(current: InstancePhase, new: InstancePhase) -> None:
    check_transition(current, new)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (P.CREATING, P.UPDATING),
        (P.READY, P.CREATING),
        (P.READY, P.FAILED),
        (P.PENDING, P.READY),
        (P.DELETING, P.READY),
        (P.FAILED, P.RESTARTING),
    ],
)
def test_forbidden_transitions(current: InstancePhase, new: InstancePhase) -> None:
    with pytest.raises(ValueError, match=f"Instance phase {current} cannot become {new}"):
        check_transition(current, new)


class TestClock:
    def test_deadline_from_start(self) -> None:
        assert ReadinessClock(at(0)).deadline(1800) == at(1800)

    def test_no_timeout_no_deadline(self) -> None:
        assert ReadinessClock(at(0)).deadline(None) is None
        assert ReadinessClock(at(0)).deadline(0) is None

    def test_hold_stops_clock_and_grants_full_window(self) -> None:
        held = ReadinessClock(at(0)).observe(["QuotaExceeded"], at(100))
        assert held.deadline(1800) is None and held.hold == "QuotaExceeded"
        still = held.observe(["QuotaExceeded"], at(5000))
        assert still.held_since == at(100)
        released = still.observe([], at(6000))
        assert released.deadline(1800) == at(7800)

    def test_no_hold_keeps_clock(self) -> None:
        clock = ReadinessClock(at(0))
        assert clock.observe([], at(50)) is clock


CHART = UpdateRetryPolicy()


class TestRetryBlock:
    def test_chart_policy_three_attempts(self) -> None:
        first = record_counting_failure(None, CHART, "r", "ErrImagePull", at(0))
        assert first.state == RetryBlockState.BACKOFF and first.attempts_started == 1
        assert first.next_retry_at == at(60)
        assert not retry_due(first, at(59)) and retry_due(first, at(60))
        second = start_retry(first)
        assert second.state == RetryBlockState.RETRY_IN_PROGRESS and second.attempts_started == 2
        failed_again = record_counting_failure(second, CHART, "r", "ErrImagePull", at(100))
        assert failed_again.state == RetryBlockState.BACKOFF and failed_again.next_retry_at == at(220)
        assert failed_again.first_failure_at == at(0)
        third = start_retry(failed_again)
        held = record_counting_failure(third, CHART, "r", "ImagePullBackOff", at(300))
        assert held.state == RetryBlockState.HELD and held.attempts_started == 3
        assert held.reason == "ImagePullBackOff" and held.next_retry_at is None

    def test_no_policy_holds_at_first_failure(self) -> None:
        assert record_counting_failure(None, None, "r", "ErrImagePull", at(0)).state == RetryBlockState.HELD

    def test_new_revision_starts_fresh(self) -> None:
        held = record_counting_failure(None, None, "old", "ErrImagePull", at(0))
        fresh = record_counting_failure(held, CHART, "new", "ErrImagePull", at(10))
        assert fresh.state == RetryBlockState.BACKOFF and fresh.attempts_started == 1
        assert fresh.first_failure_at == at(10)

    def test_blocks_attempt(self) -> None:
        backoff = record_counting_failure(None, CHART, "r", "ErrImagePull", at(0))
        assert blocks_attempt(backoff, "r", at(30)) and not blocks_attempt(backoff, "r", at(60))
        assert not blocks_attempt(backoff, "other", at(30))
        held = record_counting_failure(None, None, "r", "ErrImagePull", at(0))
        assert blocks_attempt(held, "r", at(10_000))

    @pytest.mark.parametrize(
        ("requested", "released"),
        [("7c9e1a2b3c", True), ("7c9e1a2b", True), ("7c9e", False), ("other", False), ("", False)],
    )
    def test_release_matches_full_or_eight_hex(self, requested: str, released: bool) -> None:
        held = record_counting_failure(None, None, "7c9e1a2b3c", "ErrImagePull", at(0))
        assert release_matches(held, requested) is released

    def test_release_only_held(self) -> None:
        backoff = record_counting_failure(None, CHART, "7c9e1a2b3c", "ErrImagePull", at(0))
        assert not release_matches(backoff, "7c9e1a2b3c")

    @pytest.mark.parametrize(
        ("failures", "delay"), [(0, 60), (1, 60), (2, 120), (3, 240), (4, 480), (5, 600), (20, 600)]
    )
    def test_rebuild_delay(self, failures: int, delay: float) -> None:
        assert rebuild_delay_seconds(failures) == delay


@pytest.mark.parametrize(
    ("strategy", "multi_pod", "in_place", "plan"),
    [
        (UpdateStrategyType.SURGE_THEN_DRAIN, False, False, UpdateWay.SURGE),
        (UpdateStrategyType.SURGE_THEN_DRAIN, True, False, UpdateWay.RECREATE),
        (UpdateStrategyType.RECREATE_POD, False, True, UpdateWay.RECREATE),
        (UpdateStrategyType.IN_PLACE_IF_POSSIBLE, False, True, UpdateWay.IN_PLACE),
        (UpdateStrategyType.IN_PLACE_IF_POSSIBLE, True, False, UpdateWay.RECREATE),
        (UpdateStrategyType.IN_PLACE_ONLY, True, True, UpdateWay.IN_PLACE),
        (UpdateStrategyType.IN_PLACE_ONLY, False, False, UpdateWay.REFUSE),
    ],
)
def test_plan_update(strategy: UpdateStrategyType, multi_pod: bool, in_place: bool, plan: UpdateWay) -> None:
    workers: dict[str, Any] = {"worker_pod_spec": {"containers": []}, "worker_count": 2} if multi_pod else {}
    old = spec(**workers)
    new = spec(revision="b", update_strategy_type=strategy, **workers)
    assert choose_update_way(old, new, in_place) == plan


def test_single_pod_ordinal_alternates() -> None:
    assert next_ordinal(0) == 1 and next_ordinal(1) == 0


POLICY = ForceDeletePolicy(overdue_slack_seconds=60, node_unreachable_threshold_seconds=300)


def stuck(**fields: Any) -> PodSummary:
    values: dict[str, Any] = {
        "name": "p",
        "uid": "u",
        "node_name": "n1",
        "terminating": True,
        "deletion_timestamp": at(0),
        "node_ready": "Unknown",
        "node_ready_since": at(0),
    }
    values.update(fields)
    return PodSummary(**values)


@pytest.mark.parametrize(
    ("pod_fields", "now", "policy", "evidence"),
    [
        ({}, 400, POLICY, "node-not-ready"),
        ({}, 400, None, None),
        ({}, 30, POLICY, None),
        ({}, 200, POLICY, None),
        ({"finalizers": ("keep",)}, 400, POLICY, None),
        ({"node_ready": "True"}, 400, POLICY, None),
        ({"node_missing": True}, 61, POLICY, "node-gone"),
        (
            {"node_unreachable_since": at(0), "node_ready_since": at(350)},
            400,
            POLICY,
            "node-unreachable-taint",
        ),
        ({"terminating": False}, 400, POLICY, None),
    ],
)
def test_force_delete_evidence(
    pod_fields: dict[str, Any], now: float, policy: ForceDeletePolicy | None, evidence: str | None
) -> None:
    assert force_delete_evidence(stuck(**pod_fields), policy, at(now)) == evidence


def test_event_messages_are_verbatim() -> None:
    assert retry_held_message(spec(), 3, "ErrImagePull") == (
        "InferenceReplica ns/chat-engine component=engine update to revision chat-engine-7c9e1a2b3c held after "
        "3 failed attempt(s) (last failure: ErrImagePull); publish a corrected revision or raise "
        "lifecycle.updateRetry limits"
    )
    assert in_place_refused_message(spec()) == (
        "OMENative component=engine instance=0 rejected update: InPlaceOnly strategy but diff exceeds container images"
    )


@pytest.mark.parametrize(
    ("pod_fields", "policy", "due"),
    [
        ({}, POLICY, 300),
        ({"node_ready_since": at(-1000)}, POLICY, 60),
        ({"node_missing": True}, POLICY, 60),
        ({"node_unreachable_since": at(100), "node_ready_since": at(50)}, POLICY, 350),
        ({}, None, None),
        ({"finalizers": ("keep",)}, POLICY, None),
        ({"node_ready": "True"}, POLICY, None),
    ],
)
def test_force_delete_due_at(
    pod_fields: dict[str, Any], policy: ForceDeletePolicy | None, due: float | None
) -> None:
    result = force_delete_due_at(stuck(**pod_fields), policy)
    assert result == (None if due is None else at(due))
    if result is not None:
        assert force_delete_evidence(stuck(**pod_fields), policy, result + timedelta(seconds=1)) is not None


@given(
    max_attempts=st.integers(min_value=1, max_value=6),
    delays=st.lists(st.floats(min_value=1, max_value=600), min_size=1, max_size=4),
    gaps=st.lists(st.floats(min_value=0, max_value=1000), min_size=1, max_size=10),
)
def test_retry_block_never_exceeds_its_attempts(
    max_attempts: int, delays: list[float], gaps: list[float]
) -> None:
    """Whatever the timing, a revision is held exactly when its attempts run out, and a
    Backoff block always names when the next attempt may start."""
    retry = UpdateRetryPolicy(max_attempts=max_attempts, attempt_delays_seconds=delays)
    block = None
    clock = 0.0
    for gap in gaps:
        clock += gap
        block = record_counting_failure(block, retry, "r", "ErrImagePull", at(clock))
        assert 1 <= block.attempts_started <= max_attempts
        if block.state == RetryBlockState.HELD:
            assert block.attempts_started == max_attempts
            assert blocks_attempt(block, "r", at(clock + 10**6))
            break
        assert block.next_retry_at is not None and block.next_retry_at > at(clock)
        assert blocks_attempt(block, "r", at(clock)) and retry_due(block, block.next_retry_at)
        block = start_retry(block)


@given(
    holds=st.lists(st.tuples(st.floats(min_value=0, max_value=5000), st.booleans()), max_size=12),
    timeout=st.floats(min_value=1, max_value=7200),
)
def test_readiness_deadline_always_grants_a_full_window(
    holds: list[tuple[float, bool]], timeout: float
) -> None:
    """The deadline is never sooner than a full timeout after the last time a hold ended."""
    clock = ReadinessClock(at(0))
    now = 0.0
    window_start = 0.0
    for gap, held in holds:
        now += gap
        before = clock
        clock = clock.observe(["QuotaExceeded"] if held else [], at(now))
        if before.held_since is not None and not held:
            window_start = now
        deadline = clock.deadline(timeout)
        if held:
            assert deadline is None
        else:
            assert deadline is not None and deadline >= at(window_start + timeout) - timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("running", "target", "pods_created", "keeps"),
    [
        ("rev-1", "rev-1", True, True),  # a rebuild of a revision it ran: wait for its pods
        ("rev-1", "rev-1", False, False),  # nothing was created: nothing to wait for
        (None, "rev-1", True, False),  # a first create: rebuilt after back-off
        ("rev-1", "rev-2", True, False),  # a new revision: its own fault may be the cause
    ],
)
def test_keeps_failed_attempt(running: str | None, target: str, pods_created: bool, keeps: bool) -> None:
    assert keeps_failed_attempt(running, target, pods_created) is keeps


@pytest.mark.parametrize(
    ("checks", "seconds"), [(0, 5.0), (1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0), (5, 60.0), (500, 60.0)]
)
def test_pod_group_recheck_backs_off_to_a_minute(checks: int, seconds: float) -> None:
    assert pod_group_recheck_seconds(checks) == seconds


@pytest.mark.parametrize(
    ("tries", "seconds"), [(1, 30.0), (2, 60.0), (3, 120.0), (4, 240.0), (5, 300.0), (500, 300.0)]
)
def test_a_headless_service_the_quota_refused_is_tried_again_backing_off_to_five_minutes(tries: int, seconds: float) -> None:
    assert service_recheck_seconds(tries) == seconds


def test_pod_group_taken_message_names_group_owner_and_fix() -> None:
    message = pod_group_taken_message(spec(), "InferenceService other (uid u-2)")
    assert message.startswith("PodGroup ns/chat-engine-0 already exists and does not belong to this Instance")
    assert "(found owner: InferenceService other (uid u-2))" in message
    assert "kubectl delete podgroup chat-engine-0 -n ns" in message


@pytest.mark.parametrize(
    ("pod_fields", "now", "blocked"),
    [
        ({"finalizers": ("example.com/keep",)}, 400, "node-not-ready"),
        ({"finalizers": ("example.com/keep",), "node_missing": True}, 61, "node-gone"),
        ({"finalizers": ("example.com/keep",)}, 200, None),  # node not dead long enough yet
        ({"finalizers": ("example.com/keep",), "node_ready": "True"}, 400, None),  # Ready node: not dead
        ({}, 400, None),  # no finalizer: force-deleted instead
    ],
)
def test_a_pod_pinned_by_finalizers_is_reported_not_force_deleted(
    pod_fields: dict[str, Any], now: float, blocked: str | None
) -> None:
    pod = stuck(**pod_fields)
    assert finalizer_block_evidence(pod, POLICY, at(now)) == blocked
    if pod.finalizers:
        assert force_delete_evidence(pod, POLICY, at(now)) is None


def test_a_pinned_pod_is_due_for_its_report_when_it_would_be_due_for_force_delete() -> None:
    pinned = stuck(finalizers=("example.com/keep",))
    assert force_delete_due_at(pinned, POLICY) is None
    assert force_delete_due_at(pinned, POLICY, with_finalizers=True) == at(300)


def test_pod_delete_blocked_by_finalizer_message_is_verbatim() -> None:
    pinned = stuck(name="chat-engine-0-default-0", finalizers=("example.com/a", "example.com/b"))
    assert delete_blocked_by_finalizer_message(spec(), pinned, at(400)) == (
        "OMENative component=engine instance=0: pod chat-engine-0-default-0 is 6m40s past its own deletion "
        "deadline but pinned by finalizers [example.com/a, example.com/b]; OME never strips another "
        "controller's finalizer — the finalizer owner must resolve it"
    )


@pytest.mark.parametrize(
    ("timeout", "deadline"),
    [(1800.0, at(1800)), (None, None), (0.0, None), (-5.0, None)],
)
def test_drain_deadline_is_delete_start_plus_instance_ready_timeout(
    timeout: float | None, deadline: datetime | None
) -> None:
    assert drain_deadline(at(0), timeout) == deadline


def test_drain_overdue_message_is_verbatim() -> None:
    message = drain_overdue_message(spec(), at(1800), at(1861.4), ["chat-engine-0-default-0", "chat-engine-0-default-1"])
    stamp = at(1800).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert message == (
        f"OMENative component=engine instance=0: drain overdue by 1m1s (deadline {stamp}); 2 pod(s) still "
        "Terminating (chat-engine-0-default-0, chat-engine-0-default-1)"
    )
