"""Which pod changes the watcher sends at once (`planning.pod_news.must_hear_now`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from models.pods import ContainerSummary, InstancePods, PodSummary
from planning.pod_news import must_hear_now, only_on_the_way_out

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def pod(name: str = "chat-engine-0-default-0", **changes: Any) -> PodSummary:
    return PodSummary(name=name, uid=changes.pop("uid", f"uid-{name}"), created_at=T0, **changes)


def pods(*members: PodSummary, listed: tuple[str, ...] | None = None) -> InstancePods:
    return InstancePods(namespace="ns", isvc="chat", component="engine", index=0, pods=members, endpoints_listed=listed)


RUNNING = ContainerSummary(name="main", state="running", ready=False)
CREATING = ContainerSummary(name="main", state="waiting", waiting_reason="ContainerCreating")
PULL_FAILED = ContainerSummary(name="main", state="waiting", waiting_reason="ErrImagePull", waiting_message="no such image")
CRASHED = ContainerSummary(name="main", state="waiting", waiting_reason="CrashLoopBackOff", last_terminated_reason="Error", last_terminated_exit_code=1)
STOPPED = ContainerSummary(name="main", state="terminated", terminated_reason="Completed", terminated_exit_code=0)
SCHEDULED = {"node_name": "gpu-1", "node_ready": "True", "scheduled": True}
READY = {**SCHEDULED, "phase": "Running", "containers_ready": True, "ready": True}
SERVING = {**READY, "serving": "True", "has_serving_gate": True}
GATED = {**SCHEDULED, "serving": "True", "has_serving_gate": True}
"""Created with its serving gate True (a single-pod Instance), not ready yet."""
LEAVING = {**READY, "serving": "False", "has_serving_gate": True}
"""Taken out of rotation by its Instance."""
NAME = "chat-engine-0-default-0"


@pytest.mark.parametrize(
    ("before", "after", "now"),
    [
        # Progress on the way up: held back.
        pytest.param(None, pods(pod()), False, id="a new pod appears Pending (the Instance created it)"),
        pytest.param(pods(), pods(pod()), False, id="a pod appears in a summary that had none"),
        pytest.param(pods(pod()), pods(pod(**SCHEDULED)), False, id="scheduled onto a Ready node"),
        pytest.param(pods(pod(**SCHEDULED)), pods(pod(**SCHEDULED, containers=(CREATING,))), False, id="ContainerCreating"),
        pytest.param(
            pods(pod(**SCHEDULED, containers=(CREATING,))),
            pods(pod(**SCHEDULED, phase="Running", containers=(RUNNING,), pod_ip="10.0.0.7")),
            False,
            id="containers started, not ready yet",
        ),
        pytest.param(pods(pod(**READY)), pods(pod(**READY), listed=(NAME,)), False, id="listed while not serving"),
        pytest.param(pods(pod(**SCHEDULED)), pods(pod(**SCHEDULED, pod_ip="10.0.0.7")), False, id="an IP"),
        pytest.param(None, pods(pod(**GATED)), False, id="a new pod created with its serving gate True"),
        pytest.param(pods(pod(**SCHEDULED)), pods(pod(**GATED)), False, id="the gate written on a pod not ready yet"),
        pytest.param(pods(pod(**GATED)), pods(pod(**SCHEDULED, serving="False")), False, id="the gate taken off a pod not ready"),
        pytest.param(
            pods(pod(**GATED), listed=()), pods(pod(**SERVING), listed=()), False, id="serving, its slice not listing it yet"
        ),
        pytest.param(
            pods(pod(**SERVING), listed=()), pods(pod(**SERVING, pod_ip="10.0.0.7"), listed=()), False,
            id="still unlisted after a late send: nothing new",
        ),
        # On its way out: the Instance took it out of rotation (only it writes the gate) to
        # delete it or hold it drained; it waits for the pod to go.
        pytest.param(
            pods(pod(**READY), listed=()), pods(pod(**READY, serving="False"), listed=()), False,
            id="the gate False on a ready pod",
        ),
        pytest.param(pods(pod(**SERVING)), pods(pod(**READY, serving="False")), False, id="out of rotation while ready"),
        pytest.param(
            pods(pod(**SERVING), listed=(NAME,)), pods(pod(**READY, serving="False"), listed=()), False,
            id="out of rotation and unlisted",
        ),
        pytest.param(
            pods(pod(**SERVING), listed=(NAME,)),
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0, deletion_grace_seconds=30), listed=()),
            False,
            id="out of rotation, then deleted: terminating",
        ),
        pytest.param(
            pods(pod(**LEAVING), listed=(NAME,)),
            pods(pod(**{**LEAVING, "containers_ready": False}, terminating=True, deletion_timestamp=T0), listed=()),
            False,
            id="a pod out of rotation stops being ready as it terminates",
        ),
        pytest.param(
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0, deletion_grace_seconds=30)),
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0, deletion_grace_seconds=0)),
            False,
            id="a pod out of rotation force-deleted (it goes next)",
        ),
        pytest.param(
            pods(pod(**LEAVING), listed=(NAME,)),
            pods(pod(**{**LEAVING, "containers_ready": False}, terminating=True, containers=(STOPPED,)), listed=()),
            False,
            id="a pod out of rotation deleted: its container stopped",
        ),
        pytest.param(
            pods(pod(**LEAVING, terminating=True)),
            pods(pod(**{**LEAVING, "phase": "Succeeded"}, terminating=True, containers=(STOPPED,))),
            False,
            id="a pod out of rotation deleted: its terminal phase",
        ),
        # What decisions read: at once.
        pytest.param(pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0)), pods(), True, id="a pod out of rotation gone"),
        pytest.param(pods(pod(**LEAVING)), pods(pod(**SERVING)), True, id="back into rotation (the drain undone)"),
        pytest.param(
            pods(pod(**LEAVING)), pods(pod(**LEAVING, containers=(CRASHED,), restart_count=1)), True,
            id="a pod out of rotation crashes",
        ),
        pytest.param(pods(pod(**LEAVING)), pods(pod(**{**LEAVING, "phase": "Failed"})), True, id="a pod out of rotation fails"),
        pytest.param(pods(pod(**LEAVING)), pods(pod(**LEAVING, node_missing=True)), True, id="the node of a pod out of rotation gone"),
        pytest.param(
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0, finalizers=("ome.io/drain",))),
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0)),
            True,
            id="a finalizer removed from a pod out of rotation",
        ),
        pytest.param(None, pods(pod(**READY)), True, id="a pod first seen Ready (adopted, or after a restart)"),
        pytest.param(pods(pod(**SCHEDULED, phase="Running")), pods(pod(**READY)), True, id="containers ready"),
        pytest.param(pods(pod(**READY)), pods(pod(**SERVING)), True, id="serving gate True"),
        pytest.param(pods(pod(**GATED)), pods(pod(**SERVING)), True, id="a pod created with its gate turns ready: serving"),
        pytest.param(
            pods(pod(**GATED), listed=()), pods(pod(**SERVING), listed=(NAME,)), True, id="serving and listed together"
        ),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING), listed=(NAME,)), True, id="listed while serving (Available)"),
        pytest.param(pods(pod(**SERVING), listed=(NAME,)), pods(pod(**SERVING), listed=()), True, id="unlisted while serving"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**{**SERVING, "containers_ready": False})), True, id="not ready any more"),
        pytest.param(pods(pod(**SERVING)), pods(), True, id="a pod gone"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING, uid="other")), True, id="replaced on its name (new uid)"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING, terminating=True)), True, id="being deleted"),
        pytest.param(pods(pod(**SCHEDULED)), pods(pod(**SCHEDULED, phase="Failed")), True, id="terminal phase"),
        pytest.param(
            pods(pod(**SERVING, terminating=True, deletion_timestamp=T0, deletion_grace_seconds=30)),
            pods(pod(**SERVING, terminating=True, deletion_timestamp=T0, deletion_grace_seconds=0)),
            True,
            id="deletion grace shortened (a force delete)",
        ),
        pytest.param(
            pods(pod(**SERVING, terminating=True, deletion_timestamp=T0, finalizers=("ome.io/drain",))),
            pods(pod(**SERVING, terminating=True, deletion_timestamp=T0)),
            True,
            id="a finalizer removed from a terminating pod",
        ),
        pytest.param(None, pods(pod(finalizers=("ome.io/drain",))), False, id="a new pod with its finalizer (progress)"),
        pytest.param(pods(pod(**SCHEDULED)), pods(pod(**SCHEDULED, containers=(PULL_FAILED,))), True, id="image pull failing"),
        pytest.param(None, pods(pod(**SCHEDULED, containers=(PULL_FAILED,))), True, id="a new pod already failing to pull"),
        pytest.param(pods(pod(**SCHEDULED, phase="Running")), pods(pod(**SCHEDULED, phase="Running", containers=(CRASHED,), restart_count=1)), True, id="a crash"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**{**SERVING, "node_ready": "Unknown"})), True, id="node not Ready"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING, node_missing=True)), True, id="node gone"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING, node_unreachable_since=T0)), True, id="node unreachable"),
        pytest.param(pods(pod()), pods(pod(unschedulable_reason="Unschedulable")), True, id="unschedulable"),
        pytest.param(None, pods(pod(scheduling_gated=True)), True, id="a new pod held by a scheduling gate"),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING), pod("chat-engine-0-default-1", **SERVING)), True, id="another pod appears serving"),
    ],
)
def test_must_hear_now(before: InstancePods | None, after: InstancePods, now: bool) -> None:
    assert must_hear_now(before, after) is now


OTHER = "chat-engine-0-default-1"


@pytest.mark.parametrize(
    ("before", "after", "longer"),
    [
        pytest.param(
            pods(pod(**SERVING), pod(OTHER, **SERVING), listed=(NAME, OTHER)),
            pods(pod(**LEAVING), pod(OTHER, **SERVING), listed=(OTHER,)),
            True,
            id="the old pod out of rotation and unlisted, the new one unchanged",
        ),
        pytest.param(
            pods(pod(**LEAVING)),
            pods(pod(**LEAVING, terminating=True, deletion_timestamp=T0, containers=(STOPPED,))),
            True,
            id="a pod out of rotation deleted",
        ),
        pytest.param(
            pods(pod(**LEAVING), pod(OTHER, **GATED)),
            pods(pod(**LEAVING, terminating=True), pod(OTHER, **SCHEDULED, pod_ip="10.0.0.7", serving="True")),
            False,
            id="another pod's progress too: the usual hold",
        ),
        pytest.param(pods(pod(**SERVING)), pods(pod(**SERVING, pod_ip="10.0.0.8")), False, id="no pod on its way out"),
        pytest.param(pods(pod(**LEAVING)), pods(), False, id="the pod gone"),
        pytest.param(None, pods(pod(**LEAVING)), False, id="nothing sent before"),
        pytest.param(
            pods(pod(**LEAVING), listed=()), pods(pod(**LEAVING), listed=(OTHER,)), False, id="another pod listed"
        ),
    ],
)
def test_only_on_the_way_out(before: InstancePods | None, after: InstancePods, longer: bool) -> None:
    assert only_on_the_way_out(before, after) is longer
