"""The `ome.*` span attributes parsed from workflow IDs and operation inputs: every ID shape of
workflows/names.py, hyphenated InferenceService names, workload-cluster suffixes, and IDs that
name nothing. The IDs are built with the real name functions, so a change of shape fails here."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.trace_attributes import (
    CLUSTER,
    COMPONENT,
    INSTANCE,
    ISVC,
    NAMESPACE,
    NODE,
    revision_of,
    workflow_attributes,
)
from workflows.names import (
    drain_workflow_id,
    instance_workflow_id,
    irep_workflow_id,
    isvc_workflow_id,
    migration_workflow_id,
    rollout_workflow_id,
    trafficmap_workflow_id,
)

pytestmark = pytest.mark.unit

CASES: list[tuple[str, str, dict[str, str]]] = [
    ("isvc", isvc_workflow_id("prod", "chat"), {NAMESPACE: "prod", ISVC: "chat"}),
    ("isvc with hyphens", isvc_workflow_id("prod", "llama-3-chat"), {NAMESPACE: "prod", ISVC: "llama-3-chat"}),
    (
        "isvc member copy in a workload cluster",
        isvc_workflow_id("prod", "chat", "worker-a"),
        {NAMESPACE: "prod", ISVC: "chat", CLUSTER: "worker-a"},
    ),
    ("irep", irep_workflow_id("prod", "chat", "engine"), {NAMESPACE: "prod", ISVC: "chat", COMPONENT: "engine"}),
    (
        "irep of an isvc whose name holds a component word",
        irep_workflow_id("prod", "router-engine-x", "decoder"),
        {NAMESPACE: "prod", ISVC: "router-engine-x", COMPONENT: "decoder"},
    ),
    (
        "irep in a workload cluster",
        irep_workflow_id("prod", "chat", "router", "gpu-east"),
        {NAMESPACE: "prod", ISVC: "chat", COMPONENT: "router", CLUSTER: "gpu-east"},
    ),
    (
        "instance",
        instance_workflow_id("prod", "chat", "engine", 0),
        {NAMESPACE: "prod", ISVC: "chat", COMPONENT: "engine", INSTANCE: "chat-engine-0"},
    ),
    (
        "instance of a hyphenated isvc with a two-digit index",
        instance_workflow_id("team-a", "llama-3-8b", "decoder", 12),
        {NAMESPACE: "team-a", ISVC: "llama-3-8b", COMPONENT: "decoder", INSTANCE: "llama-3-8b-decoder-12"},
    ),
    (
        "instance of an isvc named like a component and index",
        instance_workflow_id("prod", "a-engine-1", "engine", 2),
        {NAMESPACE: "prod", ISVC: "a-engine-1", COMPONENT: "engine", INSTANCE: "a-engine-1-engine-2"},
    ),
    (
        "instance in a workload cluster",
        instance_workflow_id("prod", "chat", "engine", 3, "worker-b"),
        {NAMESPACE: "prod", ISVC: "chat", COMPONENT: "engine", INSTANCE: "chat-engine-3", CLUSTER: "worker-b"},
    ),
    ("rollout", rollout_workflow_id("prod", "chat-v2", 7), {NAMESPACE: "prod", ISVC: "chat-v2"}),
    (
        "rollout in a workload cluster",
        rollout_workflow_id("prod", "chat", 7, "worker-a"),
        {NAMESPACE: "prod", ISVC: "chat", CLUSTER: "worker-a"},
    ),
    (
        "migration",
        migration_workflow_id("prod", "chat", "engine", 1, "5f0c9a"),
        {NAMESPACE: "prod", ISVC: "chat", COMPONENT: "engine", INSTANCE: "chat-engine-1"},
    ),
    (
        "migration in a workload cluster",
        migration_workflow_id("prod", "my-chat", "router", 0, "r-1", "worker-a"),
        {NAMESPACE: "prod", ISVC: "my-chat", COMPONENT: "router", INSTANCE: "my-chat-router-0", CLUSTER: "worker-a"},
    ),
    ("drain", drain_workflow_id("gpu-node-3"), {NODE: "gpu-node-3"}),
    ("trafficmap", trafficmap_workflow_id("prod", "chat"), {NAMESPACE: "prod", ISVC: "chat"}),
    ("irep without a known component", "irep/prod/chat-frontend", {NAMESPACE: "prod"}),
    ("instance without an index", "instance/prod/chat-engine", {NAMESPACE: "prod"}),
    ("rollout without a run", "rollout/prod/chat", {}),
    ("migration without a request", "migration/prod/chat-engine-0", {}),
    ("drain of something else", "drain/cluster/worker-a", {}),
    ("unknown kind", "held-1234", {}),
    ("a test workflow with slashes", "harness/prod/x", {}),
    ("empty", "", {}),
]


@pytest.mark.parametrize(("workflow_id", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_workflow_attributes(workflow_id: str, expected: dict[str, str]) -> None:
    assert workflow_attributes(workflow_id) == expected


@given(st.text(max_size=60))
def test_any_text_gives_string_attributes_and_never_raises(workflow_id: str) -> None:
    found = workflow_attributes(workflow_id)
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in found.items())


def pod(revision: str | None) -> dict[str, Any]:
    labels = {"ome.io/component": "engine"} | ({"ome.io/revision": revision} if revision else {})
    return {"metadata": {"name": "p", "labels": labels}, "spec": {}}


REVISIONS: list[tuple[str, dict[str, Any], str | None]] = [
    ("instance spec", {"namespace": "prod", "revision": "abc123", "leader_pod_spec": {}}, "abc123"),
    ("migration without a revision yet", {"revision": None, "component": "engine"}, None),
    ("empty revision", {"revision": ""}, None),
    (
        "analysis sample's canary revision",
        {"fields": {"canary_revision": "new1", "stable_revision": "old1"}, "time": "t"},
        "new1",
    ),
    ("pod batch of one revision", {"namespace": "prod", "pods": [pod("r1"), pod("r1")]}, "r1"),
    ("pod batch of two revisions", {"namespace": "prod", "pods": [pod("r1"), pod("r2")]}, None),
    ("pod batch without the label", {"namespace": "prod", "pods": [pod(None)]}, None),
    ("pods that are not objects", {"pods": ["a", 1]}, None),
    ("names of pods to delete", {"namespace": "prod", "names": ["chat-engine-0-leader-0"]}, None),
    ("nothing", {}, None),
]


@pytest.mark.parametrize(("payload", "expected"), [c[1:] for c in REVISIONS], ids=[c[0] for c in REVISIONS])
def test_revision_of(payload: dict[str, Any], expected: str | None) -> None:
    assert revision_of(payload) == expected
