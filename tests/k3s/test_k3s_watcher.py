"""The pod watcher against k3s: real list/watch streams, real kubelet status, a fake sink.

A recording sink stands in for Temporal, so the test sees exactly which `InstancePods`
summaries the watcher would signal: the pod appearing, becoming Ready and serving once the
readiness gate is set, and going away, with the node's readiness read from the real node.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes.client import ApiClient

from activities.kube import KubeActivities
from models.kube_ops import CreatePodsInput, DeletePodsInput, SetServingInput
from planning.instance.pods import render_pods
from tests.k3s.helpers import WAIT_SECONDS, api_client, fresh_namespace, instance_spec, run
from tests.recording_sink import RecordingSink
from workers.watch.pods import PodWatcher
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.k3s


@pytest.fixture(scope="module")
def client(k3s_kubeconfig: Path) -> ApiClient:
    return api_client(k3s_kubeconfig)


@pytest.fixture
def namespace(client: ApiClient) -> Iterator[str]:
    with fresh_namespace(client, "watch") as name:
        yield name


@pytest_asyncio.fixture
async def sink(client: ApiClient) -> AsyncIterator[RecordingSink]:
    recording = RecordingSink(within=WAIT_SECONDS)
    watcher = PodWatcher(client, recording)
    await watcher.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await watcher.wait_synced()
        yield recording
    finally:
        await watcher.stop()


async def test_ready_pod_is_signalled_to_its_instance(
    client: ApiClient, namespace: str, sink: RecordingSink
) -> None:
    kube = KubeActivities(client)
    spec = instance_spec(namespace)
    workflow_id = instance_workflow_id(namespace, spec.isvc, spec.component, spec.index)
    (pod,) = render_pods(spec, incarnation=1)
    name = pod["metadata"]["name"]
    (created,) = (
        await asyncio.to_thread(run, kube.create_pods, CreatePodsInput(namespace=namespace, pods=[pod]))
    ).pods

    ready = await sink.wait(workflow_id, lambda s: s.ready_count == 1, "the pod's containers ready")
    (summary,) = ready.pods
    assert (summary.name, summary.uid, summary.incarnation) == (name, created.uid, 1)
    assert summary.node_name and summary.node_ready == "True", (
        "the node's readiness comes from the node watch"
    )
    assert summary.has_serving_gate and ready.serving_count == 0, "nobody has put it in rotation yet"
    assert ready.cluster == "" and ready.resource_version

    serve = SetServingInput(namespace=namespace, pods=[name], serving=True, reason="InstanceReady")
    await asyncio.to_thread(run, kube.set_serving_condition, serve)
    serving = await sink.wait(workflow_id, lambda s: s.serving_count == 1, "the pod serving")
    assert int(serving.resource_version) > int(ready.resource_version)

    delete = DeletePodsInput(namespace=namespace, names=[name], grace_period_seconds=0)
    await asyncio.to_thread(run, kube.delete_pods, delete)
    await sink.wait(workflow_id, lambda s: not s.live_pods, "the pod gone")

    history = sink.to(workflow_id)
    for earlier, later in zip(history, history[1:], strict=False):
        assert not later.same_state(earlier), "the watcher never sends the same summary twice in a row"
