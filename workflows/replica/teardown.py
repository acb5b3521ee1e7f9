"""The InferenceReplica's deletion (spec reference §15): its Instances drained in pod batches,
its object held by the finalizer `ome.io/ir-teardown` until the component's pods and PodGroups
are gone, or until `lifecycle.teardown.deadline` releases it to background garbage collection.

The first pass deletes the object (it stays Terminating: the finalizer holds it) and starts
the deadline's clock; each pass tells the next batch of Instances to go, looks at what the
component still owns when the decision depends on it (`planning.replica.teardown`), and
records `TeardownBlocked` or `TeardownDeadlineExceeded` as the spec words them.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from models.duration import format_duration
from models.kube_ops import ListObjectsInput
from models.pods import LABEL_COMPONENT, LABEL_ISVC
from planning.instance.pods import POD_GROUP_API_VERSION
from planning.replica import events
from planning.replica.overlay import earliest
from planning.replica.teardown import (
    TeardownClock,
    TeardownOutcome,
    deadline_invalid,
    decide_teardown,
    drain_window,
    recheck_interval,
)
from planning.replica.template import instance_ready_timeout_seconds
from workflows import kube_calls
from workflows.replica.instances import drain_all
from workflows.replica.messages import ReplicaState
from workflows.replica.object import delete_object, record, release_finalizer

RELEASE_AGAIN = timedelta(seconds=1)
"""How soon a finalizer release that met a concurrent write is tried again."""


def clock(state: ReplicaState) -> TeardownClock:
    cluster = state.config.cluster
    assert state.teardown_started_at is not None
    return TeardownClock(
        started_at=state.teardown_started_at,
        deadline_seconds=cluster.teardown_deadline_seconds,
        recheck=recheck_interval(cluster.scale_down_requeue_interval_seconds),
        blocked_at=state.teardown_blocked_at,
        # An Instance's drain is overdue past its instanceReadyTimeout (§15): until then a
        # teardown whose Instances still drain is not blocked.
        drain_window=drain_window(instance_ready_timeout_seconds(state.config.effective, cluster)),
    )


async def tear_down(state: ReplicaState, now: datetime) -> tuple[bool, datetime | None]:
    """One pass of the deletion: True once the finalizer is released (the object is the
    garbage collector's); else when to look again."""
    config = state.config
    if state.teardown_started_at is None:
        state.teardown_started_at = now
        await delete_object(state, "the InferenceService is deleted; finalizer ome.io/ir-teardown holds it until its pods are gone")
    wake = await drain_all(state, now)
    teardown = clock(state)
    left = len(set(state.instances) | set(state.launched))
    pods: int | None = None
    pod_groups = 0
    if teardown.needs_look(left, now):
        pods, pod_groups = await owned_objects(state)
    step = decide_teardown(teardown, left, pods, pod_groups, now)
    match step.outcome:
        case TeardownOutcome.RELEASE:
            if await release_finalizer(state, "every pod and PodGroup is gone"):
                return True, None
            return False, now + RELEASE_AGAIN
        case TeardownOutcome.EXCEEDED:
            deadline = format_duration(config.cluster.teardown_deadline_seconds or 0.0)
            event = events.teardown_deadline_exceeded(
                config.namespace, config.ir_name, config.isvc, config.component, deadline, pods or 0
            )
            await record(state, event)
            if await release_finalizer(state, f"teardown deadline {deadline} exceeded"):
                return True, None
            return False, now + RELEASE_AGAIN
        case TeardownOutcome.BLOCKED:
            invalid = deadline_invalid(config.cluster.teardown_deadline_seconds)
            event = events.teardown_blocked(
                config.namespace, config.ir_name, config.isvc, config.component, pods or 0, pod_groups, invalid
            )
            await record(state, event)
            state.teardown_blocked_at = now
    return False, earliest(step.wake_at, wake)


async def owned_objects(state: ReplicaState) -> tuple[int, int]:
    """The component's pods (live or Terminating) and PodGroups that still exist."""
    config = state.config
    selector = f"{LABEL_ISVC}={config.isvc},{LABEL_COMPONENT}={config.component}"
    pods = await kube_calls.list_objects(
        ListObjectsInput(
            api_version="v1", kind="Pod", plural="pods", namespace=config.namespace, label_selector=selector
        ),
        summary=f"list pods {config.ir_name} still owns ({selector})",
    )
    pod_groups = 0
    if state.podgroup_crd:
        groups = await kube_calls.list_objects(
            ListObjectsInput(
                api_version=POD_GROUP_API_VERSION,
                kind="PodGroup",
                plural="podgroups",
                namespace=config.namespace,
                label_selector=selector,
            ),
            summary=f"list PodGroups {config.ir_name} still owns ({selector})",
        )
        pod_groups = len(groups.items)
    return len(pods.items), pod_groups
