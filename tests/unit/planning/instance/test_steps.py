"""The Instance's next step (planning.instance.steps): table tests, one row per situation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models.instance import (
    InstanceFailure,
    InstancePhase,
    InstanceSpec,
    RestartPolicy,
    RestartRequest,
    RetryBlock,
    RetryBlockState,
    UpdateStrategyType,
)
from models.pods import InstancePods, PodSummary
from planning.instance.rules import UpdateWay
from planning.instance.state import InstanceState
from planning.instance.steps import (
    Do,
    Step,
    Why,
    confirmed_failure_step,
    next_step,
    next_wake,
    update_taken,
)

pytestmark = pytest.mark.unit

P = InstancePhase
NOW = datetime(2026, 1, 1, tzinfo=UTC)
EARLIER, LATER = NOW - timedelta(minutes=1), NOW + timedelta(minutes=1)
POD = "chat-engine-0"
IMAGE = {"containers": [{"name": "main", "image": "sglang:1"}]}
OTHER_ARGS = {"containers": [{"name": "main", "image": "sglang:1", "args": ["--x"]}]}


def spec(revision: str = "r1", **fields: Any) -> InstanceSpec:
    base: dict[str, Any] = {
        "namespace": "ns",
        "isvc": "chat",
        "component": "engine",
        "index": 0,
        "revision": revision,
        "leader_pod_spec": IMAGE,
    }
    return InstanceSpec(**(base | fields))


def pod(restarts: int = 0, **fields: Any) -> PodSummary:
    base: dict[str, Any] = {"name": POD, "uid": "u1", "phase": "Running", "containers_ready": True}
    return PodSummary(**(base | {"ready": True, "serving": "True", "restart_count": restarts} | fields))


def pods(*summaries: PodSummary) -> InstancePods:
    return InstancePods(namespace="ns", isvc="chat", component="engine", index=0, pods=summaries)


def block(state: RetryBlockState, revision: str = "r1", next_retry_at: datetime | None = None) -> RetryBlock:
    return RetryBlock(
        target_revision=revision,
        state=state,
        attempts_started=1,
        next_retry_at=next_retry_at,
        first_failure_at=EARLIER,
        last_failure_at=EARLIER,
        reason="ImagePullBackOff",
    )


def failure(counting: bool) -> InstanceFailure:
    return InstanceFailure(reason="ImagePullBackOff", time=EARLIER, counting=counting)


def ready(**fields: Any) -> InstanceState:
    """A Ready single-pod Instance running r1, its one pod serving."""
    base: dict[str, Any] = {
        "spec": spec(),
        "phase": P.READY,
        "running_revision": "r1",
        "members": {POD: "u1"},
        "restart_baseline": {POD: 0},
        "pods": pods(pod()),
    }
    return InstanceState(**(base | fields))


def failed(**fields: Any) -> InstanceState:
    return InstanceState(**({"spec": spec(), "phase": P.FAILED} | fields))


BACKOFF_DUE = block(RetryBlockState.BACKOFF, next_retry_at=EARLIER)
BACKOFF_LATER = block(RetryBlockState.BACKOFF, next_retry_at=LATER)
HELD = block(RetryBlockState.HELD)
RECREATE = RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART
IN_PLACE_ONLY = UpdateStrategyType.IN_PLACE_ONLY

# (name, state, expected do, expected why)
ROWS: list[tuple[str, InstanceState, Do, Why]] = [
    # Creating and Pending
    ("a new Instance creates", InstanceState(spec=spec()), Do.CREATE, Why.CREATING),
    (
        "a held revision is not tried",
        InstanceState(spec=spec(), retry_block=HELD),
        Do.FAIL,
        Why.RETRY_BLOCKED,
    ),
    (
        "a backing-off revision waits Failed",
        InstanceState(spec=spec(), retry_block=BACKOFF_LATER),
        Do.FAIL,
        Why.RETRY_BLOCKED,
    ),
    ("a due retry creates", InstanceState(spec=spec(), retry_block=BACKOFF_DUE), Do.CREATE, Why.CREATING),
    (
        "a new revision escapes the old one's hold",
        InstanceState(spec=spec(), retry_block=HELD, pending_update=spec("r2")),
        Do.CREATE,
        Why.CREATING,
    ),
    (
        "Pending rebuilds unpaused",
        InstanceState(spec=spec(), phase=P.PENDING),
        Do.CREATE,
        Why.PENDING_REBUILD,
    ),
    (
        "Pending rests during a pause",
        InstanceState(spec=spec(), phase=P.PENDING, pause_mode="Recover"),
        Do.WAIT,
        Why.PENDING_PAUSED,
    ),
    ("an operation in flight has no step", InstanceState(spec=spec(), phase=P.UPDATING), Do.WAIT, Why.BUSY),
    # Ready: requests and updates
    ("Ready and healthy waits", ready(), Do.WAIT, Why.HEALTHY),
    (
        "a restart request restarts",
        ready(pending_restart=RestartRequest()),
        Do.RESTART,
        Why.RESTART_REQUESTED,
    ),
    (
        "a restart request goes before an update",
        ready(pending_restart=RestartRequest(), pending_update=spec("r2")),
        Do.RESTART,
        Why.RESTART_REQUESTED,
    ),
    ("a new revision updates", ready(pending_update=spec("r2")), Do.UPDATE, Why.NEW_REVISION),
    ("a target not yet running updates", ready(spec=spec("r2")), Do.UPDATE, Why.NEW_REVISION),
    ("no update starts paused", ready(spec=spec("r2"), pause_mode="Recover"), Do.WAIT, Why.HEALTHY),
    (
        "a refused revision is not retried",
        ready(spec=spec("r2"), refused_revision="r2"),
        Do.WAIT,
        Why.HEALTHY,
    ),
    (
        "a held target revision does not update",
        ready(spec=spec("r2"), retry_block=block(RetryBlockState.HELD, "r2")),
        Do.WAIT,
        Why.HEALTHY,
    ),
    ("the rebuild back-off delays an update", ready(spec=spec("r2"), rebuild_at=LATER), Do.WAIT, Why.HEALTHY),
    (
        "a new revision ends the rebuild back-off",
        ready(rebuild_at=LATER, pending_update=spec("r2")),
        Do.UPDATE,
        Why.NEW_REVISION,
    ),
    (
        "InPlaceOnly that needs new pods is refused",
        ready(
            running_spec=spec(update_strategy_type=IN_PLACE_ONLY),
            spec=spec("r2", update_strategy_type=IN_PLACE_ONLY, leader_pod_spec=OTHER_ARGS),
        ),
        Do.REFUSE_UPDATE,
        Why.IN_PLACE_IMPOSSIBLE,
    ),
    # Ready: pod failures
    (
        "a restarted container is confirmed",
        ready(pods=pods(pod(restarts=1))),
        Do.CONFIRM_FAILURE,
        Why.POD_FAILED,
    ),
    ("a deleted pod is confirmed", ready(pods=pods()), Do.CONFIRM_FAILURE, Why.POD_FAILED),
    (
        "frozen, a restart-policy failure waits",
        ready(spec=spec(restart_policy=RECREATE), pods=pods(pod(restarts=1)), pause_mode="Freeze"),
        Do.WAIT,
        Why.FROZEN,
    ),
    (
        "recovering, a restart-policy failure is confirmed",
        ready(spec=spec(restart_policy=RECREATE), pods=pods(pod(restarts=1)), pause_mode="Recover"),
        Do.CONFIRM_FAILURE,
        Why.POD_FAILED,
    ),
    # Failed: the ladder, first rung first
    ("Failed rests", failed(), Do.WAIT, Why.RESTING),
    (
        "a restart request recreates",
        failed(pending_restart=RestartRequest()),
        Do.RECREATE,
        Why.RESTART_REQUESTED,
    ),
    ("a new revision recreates", failed(pending_update=spec("r2")), Do.RECREATE, Why.NEW_REVISION),
    ("a due retry recreates", failed(retry_block=BACKOFF_DUE), Do.RECREATE, Why.RETRY_DUE),
    ("a retry not yet due rests", failed(retry_block=BACKOFF_LATER), Do.WAIT, Why.RESTING),
    ("frozen, a due retry rests", failed(retry_block=BACKOFF_DUE, pause_mode="Freeze"), Do.WAIT, Why.RESTING),
    (
        "recovering, a due retry recreates",
        failed(retry_block=BACKOFF_DUE, pause_mode="Recover"),
        Do.RECREATE,
        Why.RETRY_DUE,
    ),
    ("a due rebuild recreates", failed(rebuild_at=EARLIER), Do.RECREATE, Why.REBUILD_DUE),
    ("a rebuild not yet due rests", failed(rebuild_at=LATER), Do.WAIT, Why.RESTING),
    (
        "a held block keeps the rebuild back",
        failed(rebuild_at=EARLIER, retry_block=HELD),
        Do.WAIT,
        Why.RESTING,
    ),
    ("a released hold recreates", failed(last_failure=failure(counting=True)), Do.RECREATE, Why.RELEASED),
    (
        "a failure that does not count rests",
        failed(last_failure=failure(counting=False)),
        Do.WAIT,
        Why.RESTING,
    ),
    (
        "pods that came up serve again",
        failed(members={POD: "u1"}, pods=pods(pod())),
        Do.RESUME_SERVING,
        Why.PODS_READY,
    ),
    (
        "pods that came up while draining wait",
        failed(members={POD: "u1"}, pods=pods(pod()), draining=True),
        Do.WAIT,
        Why.DRAINING,
    ),
    (
        "pods not ready rest",
        failed(members={POD: "u1"}, pods=pods(pod(ready=False, containers_ready=False))),
        Do.WAIT,
        Why.RESTING,
    ),
]


@pytest.mark.parametrize(("name", "state", "do", "why"), ROWS, ids=[row[0] for row in ROWS])
def test_next_step(name: str, state: InstanceState, do: Do, why: Why) -> None:
    step = next_step(state, NOW)
    assert (step.do, step.why) == (do, why)


# (name, state, fresh pods, expected do, expected why)
CONFIRMED: list[tuple[str, InstanceState, InstancePods, Do, Why]] = [
    ("the fresh list shows no failure", ready(), pods(pod()), Do.LOOK_AGAIN, Why.NO_FAILURE),
    (
        "restart policy None: kubelet restarts",
        ready(),
        pods(pod(restarts=2)),
        Do.ACCEPT_RESTARTS,
        Why.CONTAINER_RESTARTED,
    ),
    ("restart policy None: every pod lost", ready(), pods(), Do.GO_PENDING, Why.ALL_PODS_LOST),
    (
        "frozen, lost pods still go Pending",
        ready(pause_mode="Freeze"),
        pods(),
        Do.GO_PENDING,
        Why.ALL_PODS_LOST,
    ),
    (
        "restart policy recreates",
        ready(spec=spec(restart_policy=RECREATE)),
        pods(),
        Do.RESTART,
        Why.POD_FAILED,
    ),
    (
        "frozen by the time the list answers",
        ready(spec=spec(restart_policy=RECREATE), pause_mode="Freeze"),
        pods(),
        Do.WAIT,
        Why.FROZEN,
    ),
]


@pytest.mark.parametrize(
    ("name", "state", "fresh", "do", "why"), CONFIRMED, ids=[row[0] for row in CONFIRMED]
)
def test_confirmed_failure_step(
    name: str, state: InstanceState, fresh: InstancePods, do: Do, why: Why
) -> None:
    step = confirmed_failure_step(state, fresh.pods, NOW)
    assert (step.do, step.why) == (do, why)


def test_the_bookkeeping_each_step_implies() -> None:
    r2 = spec("r2")
    assert update_taken(failed(spec=spec(), pending_update=r2, rebuild_at=LATER, failures_in_a_row=2)) == {
        "spec": r2,
        "pending_update": None,
        "rebuild_at": None,
        "failures_in_a_row": 0,
    }
    same = spec(drain_seconds=5.0)
    assert update_taken(ready(pending_update=same)) == {"spec": same, "pending_update": None}
    # Ready on the target revision: the newest spec is what runs.
    assert next_step(ready(pending_update=same), NOW).changes["running_spec"] == same
    restart = next_step(ready(pending_restart=RestartRequest(reason="Operator")), NOW)
    assert restart == Step(Do.RESTART, Why.RESTART_REQUESTED, {"pending_restart": None}, reason="Operator")
    assert next_step(failed(pending_restart=RestartRequest(), incarnation=4), NOW).changes == {
        "pending_restart": None,
        "incarnation": 5,
    }
    assert next_step(failed(rebuild_at=EARLIER), NOW).changes == {"rebuild_at": None}
    released = next_step(failed(last_failure=failure(counting=True)), NOW).changes["last_failure"]
    assert released == failure(counting=False)
    create = next_step(
        InstanceState(spec=spec(), retry_block=BACKOFF_DUE, pending_restart=RestartRequest()), NOW
    )
    assert create.changes["pending_restart"] is None
    assert create.changes["retry_block"].state == RetryBlockState.RETRY_IN_PROGRESS
    update = next_step(ready(spec=spec("r2", update_strategy_type=UpdateStrategyType.RECREATE_POD)), NOW)
    assert (update.do, update.way) == (Do.UPDATE, UpdateWay.RECREATE)
    assert next_step(ready(spec=spec("r2")), NOW).way == UpdateWay.SURGE
    refused = next_step(
        ready(
            running_spec=spec(update_strategy_type=IN_PLACE_ONLY),
            spec=spec("r2", update_strategy_type=IN_PLACE_ONLY, leader_pod_spec=OTHER_ARGS),
        ),
        NOW,
    )
    assert refused.changes == {"refused_revision": "r2"}
    kubelet = confirmed_failure_step(ready(), pods(pod(restarts=2)).pods, NOW)
    assert kubelet.changes["restart_baseline"] == {POD: 2}
    assert kubelet.changes["last_failure"].reason == "ContainerRestarted"


@pytest.mark.parametrize(
    ("name", "state", "wake"),
    [
        ("nothing pending: no wake", failed(), None),
        ("a Backoff retry wakes at its time", failed(retry_block=BACKOFF_LATER), LATER),
        (
            "frozen, a Failed Instance's retry is no reason",
            failed(retry_block=BACKOFF_LATER, pause_mode="Freeze"),
            None,
        ),
        ("a rebuild wakes at its time", failed(rebuild_at=LATER), LATER),
        (
            "paused, a Ready Instance's rebuild is no reason",
            ready(rebuild_at=LATER, pause_mode="Recover"),
            None,
        ),
        ("a headless Service the quota refused, to try again", ready(service_retry_at=LATER), LATER),
        ("the earlier of two", failed(rebuild_at=LATER, service_retry_at=NOW), NOW),
    ],
)
def test_next_wake(name: str, state: InstanceState, wake: datetime | None) -> None:
    assert next_wake(state, NOW) == wake
