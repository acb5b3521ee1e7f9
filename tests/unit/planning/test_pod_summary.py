"""Table tests of `planning.pod_summary`: what a pod and its node reduce to."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from models.pods import InstancePods, PodSummary
from planning.pod_summary import (
    MESSAGE_LIMIT,
    group_by_instance,
    instance_key,
    instance_pods,
    listed_pods,
    summarize_pod,
)

pytestmark = pytest.mark.unit

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"


def pod(
    name: str = "chat-engine-1-default-0",
    *,
    index: str = "1",
    role: str = "default",
    phase: str = "Running",
    node: str | None = "gpu-node-1",
    conditions: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": T0,
            "labels": {
                "ome.io/inferenceservice": "chat",
                "ome.io/component": "engine",
                "ome.io/instance-index": index,
                "ome.io/revision": "7c9e",
                "ome.io/role": role,
                "ome.io/incarnation": "2",
            },
        },
        "spec": {"readinessGates": [{"conditionType": "ome.io/serving"}]},
        "status": {"phase": phase, "conditions": conditions or [], "containerStatuses": containers or []},
    }
    if node:
        obj["spec"]["nodeName"] = node
    for path, value in extra.items():
        section, _, key = path.partition("__")
        obj[section][key] = value
    return obj


def node(
    name: str = "gpu-node-1", ready: str = "True", taints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": T0}]},
    }


def cond(kind: str, status: str, **fields: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": T1, **fields}


RUNNING = {"name": "engine", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": T0}}}
READY_CONDITIONS = [
    cond("PodScheduled", "True"),
    cond("ContainersReady", "True"),
    cond("Ready", "True"),
    cond("ome.io/serving", "True", reason="Admitted"),
]


@pytest.mark.parametrize(
    ("case", "obj", "node_obj", "expected"),
    [
        (
            "ready and serving",
            pod(conditions=READY_CONDITIONS, containers=[RUNNING]),
            node(),
            {
                "ready": True,
                "containers_ready": True,
                "serving": "True",
                "is_serving": True,
                "node_ready": "True",
            },
        ),
        (
            "containers ready but serving gate unset",
            pod(conditions=READY_CONDITIONS[:2] + [cond("Ready", "False")], containers=[RUNNING]),
            node(),
            {
                "is_ready": True,
                "is_serving": False,
                "serving": None,
                "ready": False,
                "has_serving_gate": True,
            },
        ),
        (
            "serving withdrawn",
            pod(conditions=[*READY_CONDITIONS[:3], cond("ome.io/serving", "False")], containers=[RUNNING]),
            node(),
            {"serving": "False", "is_serving": False, "is_ready": True},
        ),
        (
            "unschedulable",
            pod(
                node=None,
                phase="Pending",
                conditions=[cond("PodScheduled", "False", reason="Unschedulable", message="0/12 nodes: gpu")],
            ),
            None,
            {
                "scheduled": False,
                "unschedulable_reason": "Unschedulable",
                "node_ready": None,
                "node_missing": False,
            },
        ),
        (
            "gated by kueue",
            pod(node=None, phase="Pending", spec__schedulingGates=[{"name": "kueue.x-k8s.io/admission"}]),
            None,
            {"scheduling_gated": True, "scheduled": False},
        ),
        (
            "image pull backoff",
            pod(
                phase="Pending",
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
                        },
                    }
                ],
            ),
            node(),
            {
                "waiting_reasons": [("engine", "ImagePullBackOff", "Back-off pulling image")],
                "is_ready": False,
            },
        ),
        (
            "crash loop keeps the last exit code",
            pod(
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "restartCount": 4,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 137}},
                    }
                ],
            ),
            node(),
            {"restart_count": 4, "container0.last_terminated_exit_code": 137, "container0.state": "waiting"},
        ),
        (
            "terminated container",
            pod(
                phase="Failed",
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "message": "oom"}},
                    }
                ],
            ),
            node(),
            {
                "is_terminal": True,
                "container0.terminated_reason": "OOMKilled",
                "container0.terminated_exit_code": 137,
            },
        ),
        (
            "terminating with finalizer",
            pod(
                conditions=READY_CONDITIONS,
                containers=[RUNNING],
                metadata__deletionTimestamp=T1,
                metadata__finalizers=["example.com/hold"],
            ),
            node(),
            {
                "terminating": True,
                "is_ready": False,
                "is_serving": False,
                "finalizers": ("example.com/hold",),
            },
        ),
        (
            "node gone",
            pod(conditions=READY_CONDITIONS, containers=[RUNNING]),
            None,
            {"node_missing": True, "node_ready": "Unknown"},
        ),
        (
            "node unreachable",
            pod(conditions=READY_CONDITIONS, containers=[RUNNING]),
            node(
                ready="Unknown",
                taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": T1}],
            ),
            {"node_ready": "Unknown", "node_unreachable_since": datetime(2026, 1, 1, 0, 1, tzinfo=UTC)},
        ),
        (
            "labels parsed",
            pod(name="chat-engine-3-worker-2", index="3", role="worker"),
            node(),
            {"role": "worker", "ordinal": 2, "instance_index": 3, "incarnation": 2, "revision": "7c9e"},
        ),
        (
            "evicted pod reason",
            pod(phase="Failed", status__reason="Evicted", status__message="node low on memory"),
            node(),
            {"pod_reason": "Evicted", "pod_message": "node low on memory", "is_terminal": True},
        ),
    ],
)
def test_summarize_pod(
    case: str, obj: dict[str, Any], node_obj: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    summary = summarize_pod(obj, node_obj)
    for field, want in expected.items():
        if field.startswith("container0."):
            have = getattr(summary.containers[0], field.split(".", 1)[1])
        elif field == "waiting_reasons":
            have = summary.waiting_reasons()
        else:
            have = getattr(summary, field)
        assert have == want, f"{case}: {field} is {have!r}, expected {want!r}"


def test_long_kubelet_messages_are_capped() -> None:
    obj = pod(
        containers=[
            {"name": "engine", "state": {"waiting": {"reason": "ErrImagePull", "message": "x" * 5000}}}
        ]
    )
    message = summarize_pod(obj, node()).containers[0].waiting_message
    assert message is not None and len(message) == MESSAGE_LIMIT


def test_summary_ignores_changes_that_do_not_matter() -> None:
    before = pod(conditions=READY_CONDITIONS, containers=[RUNNING])
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = "999"
    after["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    after["status"]["conditions"][0]["lastProbeTime"] = T1
    assert summarize_pod(before, node()) == summarize_pod(after, node())
    assert hash(summarize_pod(before, node())) == hash(summarize_pod(after, node()))


def test_summary_changes_when_readiness_changes() -> None:
    before = pod(conditions=READY_CONDITIONS[:2], containers=[RUNNING])
    after = pod(conditions=READY_CONDITIONS, containers=[RUNNING])
    assert summarize_pod(before, node()) != summarize_pod(after, node())
    # Node readiness is part of a pod's summary: a failing node changes it.
    assert summarize_pod(after, node()) != summarize_pod(after, node(ready="False"))


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {"ome.io/inferenceservice": "chat", "ome.io/component": "engine", "ome.io/instance-index": "0"},
            ("team-a", "chat", "engine", 0),
        ),
        ({"ome.io/inferenceservice": "chat", "ome.io/component": "engine"}, None),
        (
            {"ome.io/inferenceservice": "chat", "ome.io/component": "engine", "ome.io/instance-index": "x"},
            None,
        ),
        (
            {"ome.io/inferenceservice": "chat", "ome.io/component": "engine", "ome.io/instance-index": "-1"},
            None,
        ),
        ({"ome.io/component": "engine", "ome.io/instance-index": "0"}, None),
    ],
)
def test_instance_key(labels: dict[str, str], expected: tuple[str, str, str, int] | None) -> None:
    assert instance_key({"metadata": {"namespace": "team-a", "labels": labels}}) == expected


def test_group_by_instance_sorts_leader_first_and_ignores_foreign_pods() -> None:
    pods = [
        pod("chat-engine-0-worker-1", index="0", role="worker"),
        pod("chat-engine-0-leader-0", index="0", role="leader"),
        pod("chat-engine-0-worker-0", index="0", role="worker"),
        pod("chat-engine-1-default-0", index="1"),
        {"metadata": {"name": "unrelated", "namespace": "team-a", "labels": {"app": "x"}}},
    ]
    grouped = group_by_instance(pods, {"gpu-node-1": node()}, resource_version="42", cluster="east")
    assert set(grouped) == {("team-a", "chat", "engine", 0), ("team-a", "chat", "engine", 1)}
    leader_group = grouped[("team-a", "chat", "engine", 0)]
    assert [p.name for p in leader_group.pods] == [
        "chat-engine-0-leader-0",
        "chat-engine-0-worker-0",
        "chat-engine-0-worker-1",
    ]
    assert leader_group.resource_version == "42" and leader_group.cluster == "east"
    assert leader_group.endpoints_listed is None


def test_same_state_ignores_resource_version_only() -> None:
    key = ("team-a", "chat", "engine", 1)
    ready = [pod(conditions=READY_CONDITIONS, containers=[RUNNING])]
    first = instance_pods(key, ready, {"gpu-node-1": node()}, resource_version="10")
    again = instance_pods(key, ready, {"gpu-node-1": node()}, resource_version="11")
    changed = instance_pods(key, [pod(containers=[RUNNING])], {"gpu-node-1": node()}, resource_version="12")
    assert first.same_state(again)
    assert not first.same_state(changed)
    assert not first.same_state(None)
    assert InstancePods.model_validate_json(first.model_dump_json()) == first


def test_endpoint_listing() -> None:
    slices = [
        {
            "metadata": {"namespace": "team-a", "name": "chat-engine-abc"},
            "endpoints": [
                {
                    "targetRef": {"kind": "Pod", "name": "chat-engine-1-default-0"},
                    "conditions": {"ready": True},
                },
                {
                    "targetRef": {"kind": "Pod", "name": "chat-engine-2-default-0"},
                    "conditions": {"ready": False},
                },
                {"targetRef": {"kind": "Pod", "name": "chat-engine-3-default-0"}},
            ],
        }
    ]
    listed = listed_pods(slices)
    assert listed == {("team-a", "chat-engine-1-default-0"), ("team-a", "chat-engine-3-default-0")}
    summary = instance_pods(("team-a", "chat", "engine", 1), [pod()], {}, endpoints=listed)
    assert summary.endpoints_listed == ("chat-engine-1-default-0",)
    summary = instance_pods(
        ("team-a", "chat", "engine", 2), [pod("chat-engine-2-default-0", index="2")], {}, endpoints=listed
    )
    assert summary.endpoints_listed == ()


@pytest.mark.parametrize(
    ("conditions", "listed"),
    [
        # The headless Service publishes not-ready addresses: `ready` is true from the first IP.
        ({"ready": True, "serving": False, "terminating": False}, False),
        ({"ready": True, "serving": True, "terminating": False}, True),
        ({"ready": True, "serving": True, "terminating": True}, False),
        # A Service that does not: a terminating pod is not ready, though it may still serve.
        ({"ready": False, "serving": True, "terminating": True}, False),
        ({"ready": False, "serving": False, "terminating": False}, False),
        # A slice from before `serving` and `terminating` existed: `ready` says it.
        ({"ready": True}, True),
        ({"ready": False}, False),
        ({}, True),
    ],
)
def test_a_pod_is_listed_while_its_endpoint_serves_and_does_not_terminate(
    conditions: dict[str, bool], listed: bool
) -> None:
    endpoint = {"targetRef": {"kind": "Pod", "name": "chat-engine-0-default-0"}, "conditions": conditions}
    slices = [{"metadata": {"namespace": "team-a"}, "endpoints": [endpoint]}]
    assert listed_pods(slices) == ({("team-a", "chat-engine-0-default-0")} if listed else set())


def test_counts_follow_the_spec_definitions() -> None:
    key = ("team-a", "chat", "engine", 0)
    pods = [
        pod(
            "chat-engine-0-leader-0",
            index="0",
            role="leader",
            conditions=READY_CONDITIONS,
            containers=[RUNNING],
        ),
        pod(
            "chat-engine-0-worker-0",
            index="0",
            role="worker",
            conditions=READY_CONDITIONS[:2],
            containers=[RUNNING],
        ),
        pod("chat-engine-0-worker-1", index="0", role="worker", containers=[RUNNING]),
    ]
    summary = instance_pods(key, pods, {"gpu-node-1": node()})
    assert (summary.ready_count, summary.serving_count) == (2, 1)
    assert isinstance(summary.pod("chat-engine-0-worker-1"), PodSummary)
    assert summary.pod("missing") is None
