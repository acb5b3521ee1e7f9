"""The Deployment watcher against kubesim, with a recording sink in place of Temporal.

kubesim's Deployment controller writes the status; the watcher must report each change of
a product Deployment to its InferenceService once (never the same state twice in a row),
report a deleted one as gone, and leave other Deployments alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kubesim.handle import KubeSim
from models.pods import LABEL_COMPONENT, LABEL_ISVC
from planning.service.deployment import DeploymentObserved
from tests.kubesim.activity_objects import WAIT_SECONDS
from workers.watch.deployments import DEPLOYMENTS, DeploymentWatcher
from workers.watch.stream import WatchItem

pytestmark = pytest.mark.kubesim

NAMESPACE = "deploy-watch"
ISVC_ID = f"isvc/{NAMESPACE}/chat"


class RecordingSink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, DeploymentObserved]] = []

    async def __call__(self, workflow_id: str, observed: DeploymentObserved) -> bool:
        self.sent.append((workflow_id, observed))
        return True

    async def wait(self, check: Callable[[DeploymentObserved], bool], what: str) -> DeploymentObserved:
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                for _, observed in reversed(self.sent):
                    if check(observed):
                        return observed
                await asyncio.sleep(0.05)
        raise AssertionError(what)


def deployment(name: str, replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    pod_labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": pod_labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {"containers": [{"name": "c", "image": "docker.io/library/busybox:1"}]},
            },
        },
    }


async def test_reports_changes_once_and_a_deletion(kubesim: KubeSim) -> None:
    api = kubesim.api_client()
    core: Any = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    apps: Any = kubernetes.client.AppsV1Api(api)  # plain dicts as bodies, as kubectl sends
    sink = RecordingSink()
    watcher = DeploymentWatcher(kubesim.api_client(), sink)
    await watcher.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await watcher.wait_synced()
        ours = {LABEL_ISVC: "chat", LABEL_COMPONENT: "router"}
        apps.create_namespaced_deployment(NAMESPACE, deployment("chat-router", 2, ours))
        apps.create_namespaced_deployment(NAMESPACE, deployment("someone-else", 1, {"app": "x"}))

        ready = await sink.wait(lambda o: o.available_replicas == 2 and o.current, "2 available")
        assert (ready.isvc, ready.component, ready.spec_replicas) == ("chat", "router", 2)
        assert {workflow_id for workflow_id, _ in sink.sent} == {ISVC_ID}, "only product Deployments"

        apps.patch_namespaced_deployment_scale("chat-router", NAMESPACE, {"spec": {"replicas": 3}})
        await sink.wait(lambda o: o.available_replicas == 3 and o.spec_replicas == 3, "3 available")

        apps.delete_namespaced_deployment("chat-router", NAMESPACE)
        gone = await sink.wait(lambda o: not o.exists, "the deletion")
        assert gone.component == "router"
    finally:
        await watcher.stop()
    states = [observed for _, observed in sink.sent]
    for before, after in zip(states, states[1:], strict=False):
        assert not after.same_state(before), f"the same state was sent twice in a row: {after}"


async def test_leading_again_resends_every_deployment() -> None:
    """Review finding 3: what this process sent in an earlier term says nothing of what another
    leader sent since (B sent NotReady, the Deployment is Ready again): `lead()` sends it all."""
    sink = RecordingSink()
    watcher = DeploymentWatcher(kubernetes.client.ApiClient(), sink)
    ready = deployment("chat-router", 1, {LABEL_ISVC: "chat", LABEL_COMPONENT: "router"})
    ready["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1}
    watcher._apply(WatchItem(DEPLOYMENTS, "RESYNC", [ready], "5"))
    watcher.lead()
    await watcher._flush()
    await watcher.follow()  # another process leads and sends a NotReady this one never sees sent
    watcher.lead()
    await watcher._flush()
    assert [observed.available_replicas for _, observed in sink.sent] == [1, 1]
