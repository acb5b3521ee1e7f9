"""Table tests of `planning.drain`: the input check, what is on a node, the back-off, the
progress from look to look, and the status an operator reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.kube_ops import EvictPodResult, NodePod
from models.migration import MigrationPhase, MigrationProgress
from planning.drain import backoff, texts
from planning.drain.pods import classify, instance_of
from planning.drain.progress import (
    RECHECK_WHILE_LEAVING,
    RECHECK_WHILE_MIGRATING,
    eviction_answered,
    eviction_failed,
    is_drained,
    migration_ended,
    migration_started,
    next_actions,
    observe,
    timed_out,
)
from planning.drain.request import deadline_of, input_problems
from planning.drain.state import DrainState, InstanceKey
from planning.drain.status import status_of
from planning.drain.texts import DrainPhase

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NODE = "gpu-node-1"


def pod(
    name: str,
    ns: str = "prod",
    isvc: str | None = "chat",
    component: str | None = "engine",
    index: str | None = "0",
    *,
    terminating: bool = False,
    owner: str = "",
    uid: str | None = None,
) -> NodePod:
    labels = {}
    if isvc is not None:
        labels["ome.io/inferenceservice"] = isvc
    if component is not None:
        labels["ome.io/component"] = component
    if index is not None:
        labels["ome.io/instance-index"] = index
    return NodePod(
        namespace=ns, name=name, uid=uid or f"uid-{name}", labels=labels, phase="Running",
        terminating=terminating, owner_kind=owner,
    )


def key(isvc: str = "chat", component: str = "engine", index: int = 0, ns: str = "prod") -> InstanceKey:
    return InstanceKey(namespace=ns, isvc=isvc, component=component, index=index)


def moving(**fields: object) -> DrainState:
    values: dict[str, object] = {"phase": DrainPhase.MIGRATING, "cordoned": True, "started_at": T0, **fields}
    return DrainState(node=NODE, **values)  # type: ignore[arg-type]


# --- input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "timeout", "expected"),
    [
        pytest.param("gpu-node-1", None, [], id="node-only"),
        pytest.param("gpu-node-1", "30m", [], id="with-timeout"),
        pytest.param("ip-10-0-1-5.ec2.internal", "1h30m", [], id="dotted-name"),
        pytest.param("", None, ["node must name the node to drain, got ''"], id="empty-node"),
        pytest.param(None, None, ["node must name the node to drain, got None"], id="missing-node"),
        pytest.param("GPU_Node", None, ["node 'GPU_Node' is not a node name"], id="malformed-node"),
        pytest.param("n", "soon", ["timeout 'soon' is not a duration"], id="bad-timeout"),
        pytest.param("n", "0s", ["timeout '0s' is not positive"], id="zero-timeout"),
        pytest.param("n", "-5m", ["timeout '-5m' is not positive"], id="negative-timeout"),
        pytest.param("n", 30, ["timeout '30' is not a string"], id="number-timeout"),
        pytest.param("", "x", ["node must name", "timeout 'x' is not a duration"], id="both"),
    ],
)
def test_input_problems(node: object, timeout: object, expected: list[str]) -> None:
    problems = input_problems(node, timeout)
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problem
    if any("timeout" in p for p in problems):
        assert any('such as "30m"' in p and "leave timeout out" in p for p in problems)


def test_deadline() -> None:
    assert deadline_of(T0, None) is None
    assert deadline_of(T0, "1h30m") == T0 + timedelta(minutes=90)


# --- what is on the node ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_pod", "instance"),
    [
        pytest.param(pod("a"), key(), id="instance-pod"),
        pytest.param(pod("a", index="3", component="decoder"), key(component="decoder", index=3), id="decoder-3"),
        pytest.param(pod("a", index=None), None, id="no-index"),
        pytest.param(pod("a", index="x"), None, id="bad-index"),
        pytest.param(pod("a", component=None), None, id="no-component"),
        pytest.param(pod("a", isvc=None), None, id="not-product"),
    ],
)
def test_instance_of(the_pod: NodePod, instance: InstanceKey | None) -> None:
    assert instance_of(the_pod) == instance


def test_classify_sorts_every_kind_of_pod() -> None:
    contents = classify(
        [
            pod("chat-engine-0-leader-0"),
            pod("chat-engine-0-worker-0"),
            pod("docs-engine-2-default-0", isvc="docs", index="2"),
            pod("chat-router-abc", component="router", index=None),
            pod("chat-engine-1-default-0", index="1", terminating=True),
            pod("node-exporter-x", ns="monitoring", isvc=None, component=None, index=None, owner="DaemonSet"),
            pod("chat-agent-x", index=None, owner="DaemonSet"),
            pod("other", ns="team-b", isvc=None, component=None, index=None, owner="ReplicaSet"),
        ]
    )
    assert {k.label: [p.name for p in v] for k, v in contents.instances.items()} == {
        "prod/chat-engine-0": ["chat-engine-0-leader-0", "chat-engine-0-worker-0"],
        "prod/docs-engine-2": ["docs-engine-2-default-0"],
    }
    assert [p.name for p in contents.evict] == ["chat-router-abc"]
    assert [p.name for p in contents.terminating] == ["chat-engine-1-default-0"]
    assert [p.key for p in contents.ignored] == ["monitoring/node-exporter-x", "prod/chat-agent-x", "team-b/other"]
    assert contents.product_pods == [
        "prod/chat-engine-0-leader-0",
        "prod/chat-engine-0-worker-0",
        "prod/chat-engine-1-default-0",
        "prod/chat-router-abc",
        "prod/docs-engine-2-default-0",
    ]


# --- back-off --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "first", "cap", "expected"),
    [
        (0, 30, 600, 30),
        (1, 30, 600, 30),
        (2, 30, 600, 60),
        (3, 30, 600, 120),
        (5, 30, 600, 480),
        (6, 30, 600, 600),
        (100, 30, 600, 600),
        (1, 5, 60, 5),
        (4, 5, 60, 40),
        (5, 5, 60, 60),
    ],
)
def test_doubling(attempts: int, first: int, cap: int, expected: int) -> None:
    got = backoff.doubling(attempts, timedelta(seconds=first), timedelta(seconds=cap))
    assert got == timedelta(seconds=expected)


@pytest.mark.parametrize(
    ("reason", "message", "attempts", "delay", "why"),
    [
        pytest.param(
            "RateLimited", "migration rate cap reached (10/10 in the last 1h0m0s)", 1, 3600,
            texts.RETRY_AFTER_WINDOW, id="rate-window-1h",
        ),
        pytest.param(
            "RateLimited", "migration rate cap reached (3/3 in the last 15m0s)", 4, 900,
            texts.RETRY_AFTER_WINDOW, id="rate-window-15m",
        ),
        pytest.param("RateLimited", "rate cap", 1, 3600, texts.RETRY_AFTER_WINDOW, id="rate-window-default"),
        pytest.param("MigrationExpired", "deadline exceeded in phase Accepted", 1, 30,
                     texts.RETRY_AFTER_BACKOFF, id="expired-first"),
        pytest.param("MigrationSurgeWedged", "surge pod wedged", 3, 120, texts.RETRY_AFTER_BACKOFF, id="third"),
        pytest.param(None, "migrated to instance=4", 1, 30, texts.RETRY_AFTER_BACKOFF, id="completed-still-here"),
    ],
)
def test_migration_retry(reason: str | None, message: str, attempts: int, delay: int, why: str) -> None:
    assert backoff.migration_retry(reason, message, attempts) == (timedelta(seconds=delay), why)


def test_eviction_retry_paces_like_kubectl_then_slows() -> None:
    assert [backoff.eviction_retry(n).total_seconds() for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]


# --- progress --------------------------------------------------------------------------------


def progress(phase: MigrationPhase, reason: str | None = None, message: str = "", surge: int | None = None) -> MigrationProgress:
    return MigrationProgress(
        uuid="u", component="engine", instance=0, from_node=NODE, phase=phase, reason=reason,
        message=message, surge_instance=surge,
    )


def test_first_look_migrates_one_instance_per_component_and_evicts_the_rest() -> None:
    pods = [
        pod("chat-engine-0-default-0"),
        pod("chat-engine-1-default-0", index="1"),
        pod("chat-decoder-0-default-0", component="decoder"),
        pod("docs-engine-0-default-0", isvc="docs"),
        pod("chat-router-x", component="router", index=None),
    ]
    state = observe(moving(), pods, T0)
    actions = next_actions(state, T0)
    assert [k.label for k in actions.migrate] == [
        "prod/chat-decoder-0", "prod/chat-engine-0", "prod/docs-engine-0",
    ]
    assert [e.key for e in actions.evict] == ["prod/chat-router-x"]
    assert actions.look_again_at == T0 + RECHECK_WHILE_LEAVING
    assert not actions.drained
    assert state.phase == DrainPhase.MIGRATING


def test_queued_instance_waits_behind_its_component_and_says_so() -> None:
    state = observe(moving(), [pod("a-0"), pod("a-1", index="1")], T0)
    state = migration_started(state, key(), "migration/prod/chat-engine-0/u1")
    actions = next_actions(state, T0)
    assert actions.migrate == [] and actions.look_again_at == T0 + RECHECK_WHILE_MIGRATING
    status = status_of(state, T0)
    assert status.instances_migrating == ["prod/chat-engine-0"]
    assert [(w.subject, w.why) for w in status.waiting] == [
        ("Instance prod/chat-engine-1", texts.queued_behind("prod/chat-engine-0")),
    ]


def test_failed_migration_backs_off_while_the_instance_stays() -> None:
    state = observe(moving(), [pod("a-0")], T0)
    state = migration_started(state, key(), "m1")
    failed = progress(MigrationPhase.FAILED, "RateLimited", "migration rate cap reached (10/10 in the last 1h0m0s)")
    state = migration_ended(state, key(), failed, T0)
    state = observe(state, [pod("a-0")], T0 + timedelta(seconds=1))
    actions = next_actions(state, T0 + timedelta(seconds=1))
    assert actions.migrate == [] and actions.look_again_at == T0 + timedelta(hours=1)
    [wait] = status_of(state, T0 + timedelta(seconds=1)).waiting
    assert wait.until == T0 + timedelta(hours=1)
    assert wait.why == texts.migration_failed(
        "RateLimited", "migration rate cap reached (10/10 in the last 1h0m0s)", texts.RETRY_AFTER_WINDOW
    )
    later = T0 + timedelta(hours=1)
    assert [k.label for k in next_actions(observe(state, [pod("a-0")], later), later).migrate] == ["prod/chat-engine-0"]


def test_completed_migration_counts_the_instance_moved_once_it_left() -> None:
    state = observe(moving(), [pod("a-0")], T0)
    state = migration_started(state, key(), "m1")
    state = migration_ended(state, key(), progress(MigrationPhase.COMPLETED, surge=4), T0)
    state = observe(state, [pod("a-0", terminating=True)], T0)
    assert not is_drained(state)
    assert next_actions(state, T0).look_again_at == T0 + RECHECK_WHILE_LEAVING
    state = observe(state, [], T0 + timedelta(seconds=5))
    assert is_drained(state) and next_actions(state, T0).drained
    assert status_of(state, T0).instances_moved == ["prod/chat-engine-0 -> 4"]
    assert state.phase == DrainPhase.EVICTING


def test_blocked_eviction_waits_then_goes() -> None:
    state = observe(moving(), [pod("web-x", index=None)], T0)
    [eviction] = next_actions(state, T0).evict
    blocked = EvictPodResult(outcome="blocked", message="blocked by PDB web: The disruption budget web needs 1")
    state = eviction_answered(state, eviction, blocked, T0)
    assert next_actions(state, T0).evict == []
    assert next_actions(state, T0).look_again_at == T0 + timedelta(seconds=5)
    [wait] = status_of(state, T0).waiting
    assert (wait.subject, wait.why) == ("pod prod/web-x", blocked.message)
    retry = T0 + timedelta(seconds=5)
    [again] = next_actions(state, retry).evict
    state = eviction_answered(state, again, EvictPodResult(outcome="evicted"), retry)
    state = observe(state, [pod("web-x", index=None, terminating=True)], retry)
    assert state.evicted == ["prod/web-x"] and state.pods_left == ["prod/web-x"]
    state = observe(state, [], retry + timedelta(seconds=5))
    assert is_drained(state)


def test_refused_eviction_waits_with_the_error_slowly_then_goes() -> None:
    state = observe(moving(), [pod("web-x", index=None)], T0)
    [eviction] = next_actions(state, T0).evict
    state = eviction_failed(state, eviction, "Forbidden: admission webhook denied the request", T0)
    assert next_actions(state, T0).evict == []
    [wait] = status_of(state, T0).waiting
    assert wait.subject == "pod prod/web-x" and wait.until == T0 + timedelta(seconds=30)
    assert wait.why == texts.eviction_failed("Forbidden: admission webhook denied the request")
    retry = T0 + timedelta(seconds=30)
    [again] = next_actions(state, retry).evict
    state = eviction_failed(state, again, "Forbidden", retry)
    assert state.evictions["prod/web-x"].retry_at == retry + timedelta(minutes=1)
    [again] = next_actions(state, retry + timedelta(minutes=1)).evict
    state = eviction_answered(state, again, EvictPodResult(outcome="evicted"), retry + timedelta(minutes=1))
    assert status_of(state, retry + timedelta(minutes=1)).waiting == []


def test_release_requested_says_nothing_new_starts() -> None:
    state = observe(moving(), [pod("chat-engine-0-default-0")], T0).model_copy(update={"release_requested": True})
    message = status_of(state, T0).message
    assert message.startswith(texts.RELEASING) and "then node" in message


def test_replaced_pod_is_a_new_eviction() -> None:
    state = observe(moving(), [pod("web-x", index=None, uid="1")], T0)
    [eviction] = next_actions(state, T0).evict
    state = eviction_answered(state, eviction, EvictPodResult(outcome="blocked", message="m"), T0)
    state = observe(state, [pod("web-x", index=None, uid="2")], T0)
    assert state.evictions["prod/web-x"].attempts == 0
    assert next_actions(state, T0).evict[0].uid == "2"


def test_terminating_pods_on_a_failed_node_do_not_hold_the_drain() -> None:
    state = observe(moving(), [pod("web-x", index=None, terminating=True)], T0, node_ready=False)
    assert state.pods_stuck == ["prod/web-x"] and is_drained(state)
    state = observe(moving(), [pod("web-x", index=None, terminating=True)], T0, node_ready=True)
    assert not is_drained(state)


def test_no_migration_starts_while_continuing_as_new() -> None:
    state = observe(moving(), [pod("a-0")], T0)
    assert next_actions(state, T0, may_start_migrations=False).migrate == []


def test_ignored_pods_do_not_hold_the_drain() -> None:
    state = observe(moving(), [pod("exporter", isvc=None, component=None, index=None, owner="DaemonSet")], T0)
    assert state.pods_ignored == ["prod/exporter"] and is_drained(state)
    assert next_actions(state, T0).drained


def test_instance_back_on_the_node_is_moved_again() -> None:
    state = observe(moving(), [pod("a-0")], T0)
    state = observe(state, [], T0)
    assert not state.instances["prod/chat-engine-0"].on_node
    state = observe(state, [pod("a-0")], T0)
    assert [k.label for k in next_actions(state, T0).migrate] == ["prod/chat-engine-0"]


@pytest.mark.parametrize(
    ("deadline", "now", "expected"),
    [(None, T0, False), (T0 + timedelta(minutes=1), T0, False), (T0, T0, True), (T0, T0 + timedelta(1), True)],
)
def test_timed_out(deadline: datetime | None, now: datetime, expected: bool) -> None:
    assert timed_out(moving(deadline=deadline), now) is expected


@pytest.mark.parametrize(
    ("phase", "fragment"),
    [
        (DrainPhase.CORDONING, "cordoning node gpu-node-1"),
        (DrainPhase.DRAINED, "signal release to uncordon it"),
        (DrainPhase.TIMED_OUT, "timed out after 30m with 0 pod(s) left"),
        (DrainPhase.RELEASED, "released (uncordoned)"),
        (DrainPhase.CANCELLED, "cancelled: nothing more moves; node uncordoned"),
        (DrainPhase.MIGRATING, "migrating node gpu-node-1: 0 migration(s) in flight, 0 pod(s) left"),
    ],
)
def test_status_message(phase: DrainPhase, fragment: str) -> None:
    assert fragment in status_of(moving(phase=phase, timeout="30m"), T0).message
