"""A multi-cluster InferenceService end to end on the time-skipping server (reference §16-§17).

Spec 000's `chat`, placed `All` on worker-a and worker-b: the placement source on the
control plane starts a member per home on that cluster's task queue, each member runs its
InferenceReplica and Instances against its own cluster (their IDs end in `@cluster`), the
source shows `status.placement` and its conditions, and the TrafficMap weighs the homes by
their serving replicas times their capacity factors: 4 on worker-a and 2 on worker-b with
worker-b's factor "3" gives weights 2 and 3. Deleting the source drains every home.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from temporalio.client import Client

from tests.workflows.multicluster_harness import (
    CLUSTERS,
    NAME,
    NAMESPACE,
    Fleet,
    chat_manifest,
    fleet,
    weights_are,
    with_factors,
)
from tests.workflows.service_harness import eventually
from workflows.names import irep_workflow_id
from workflows.service.messages import ScaleRequest
from workflows.trafficmap.messages import DrainRequest, UndrainRequest
from workflows.trafficmap.workflow import TrafficMapWorkflow


async def homes_serving(f: Fleet, counts: dict[str, int]) -> bool:
    return all(len(f.serving_pods(cluster)) == n for cluster, n in counts.items())


async def source_ready(f: Fleet) -> Any:
    view = await f.status()
    ready = view.status.condition("Ready")
    return view if ready is not None and ready.status == "True" else None


async def test_chat_placed_all_on_two_clusters_is_weighted_by_serving_replicas_and_factors(
    dev_client: Client, task_queue: str
) -> None:
    client = dev_client
    async with fleet(client, task_queue) as f:
        result = await f.apply(chat_manifest())
        assert result.accepted and result.generation == 1

        # Each home runs its own two Instances against its own cluster.
        await eventually(lambda: homes_serving(f, {"worker-a": 2, "worker-b": 2}), "two serving pods per home", 90)
        for cluster in CLUSTERS:
            member = await f.status(cluster)
            assert member.status.condition("Ready") is not None
            described = await client.get_workflow_handle(irep_workflow_id(NAMESPACE, NAME, "engine", cluster)).describe()
            assert described.task_queue == f"{task_queue}@{cluster}"
            labels = f.custom(cluster).get_namespaced_custom_object(
                "ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME
            )["metadata"]["labels"]
            assert labels["ome.io/placement-cluster"] == cluster
            assert "placement" not in f.custom(cluster).get_namespaced_custom_object(
                "ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME
            )["spec"]
        # Nothing of the service runs on the control plane itself.
        assert f.core().list_namespaced_pod(NAMESPACE).items == []

        view = await eventually(lambda: source_ready(f), "the placement source Ready", 60)
        placement = view.status.placement
        assert placement is not None and placement.phase == "Placed"
        assert sorted(c.cluster for c in placement.candidates) == list(CLUSTERS)
        assert all(c.phase == "Admitted" for c in placement.candidates)
        conditions = {c.type: c.status for c in view.status.conditions}
        assert conditions["PlacementSatisfied"] == "True" and conditions["PlacementConverged"] == "True"
        placed = f.custom().get_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME)
        assert placed["status"]["placement"]["phase"] == "Placed"

        # Same replicas, same factor: 1 and 1.
        await eventually(lambda: weights_are(f, {"worker-a": 1, "worker-b": 1}), "weights 1:1", 60)

        # Spec 000: worker-a scales to 4 on its own, worker-b's replicas serve three times as much.
        await f.handle("worker-a").signal("scale", ScaleRequest(component="engine", replicas=4))
        await eventually(lambda: homes_serving(f, {"worker-a": 4, "worker-b": 2}), "4 serving on worker-a", 90)
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 1}), "weights 2:1 without a factor", 60)
        result = await f.apply(with_factors(chat_manifest(), {"worker-b": "3"}))
        assert result.changed
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 3}), "weights 2:3 with factor 3", 60)
        entries = {e["cluster"]: e for e in (f.trafficmap_object() or {})["spec"]["entries"]}
        assert entries["worker-b"]["capacity"]["factor"] == "3"
        assert "factor" not in entries["worker-a"]["capacity"]
        isvc = f.custom().get_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME)
        tm = f.trafficmap_object() or {}
        assert tm["spec"]["observedISVCGeneration"] == isvc["metadata"]["generation"]

        # Killing worker-b's pods takes its weight away until they serve again (their
        # replacements take 3 s to become ready).
        f.homes["worker-b"].set_default_timing(ready_seconds=3.0)
        for pod in f.serving_pods("worker-b"):
            f.homes["worker-b"].kill_pod(NAMESPACE, pod.metadata.name)
        await eventually(lambda: weights_are(f, {"worker-a": 1, "worker-b": 0}), "worker-b at 0 while it recovers", 60)
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 3}), "worker-b's weight back", 90)
        f.homes["worker-b"].set_default_timing(ready_seconds=0.02)

        # A drain by ID holds worker-b at 0 and leaves worker-a's weight (§20).
        result_rows = await f.trafficmap().execute_update(
            TrafficMapWorkflow.drain, DrainRequest(id="upgrade-42", cluster="worker-b", reason="maintenance")
        )
        assert [(r.override_id, r.cluster) for r in result_rows.rows] == [("upgrade-42", "worker-b")]
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 0}), "worker-b drained", 60)
        await f.trafficmap().execute_update(TrafficMapWorkflow.undrain, UndrainRequest(id="upgrade-42"))
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 3}), "worker-b undrained", 60)

        # Deleting the service drains both homes, then the map and the source object go.
        await f.handle().signal("delete")
        await eventually(lambda: homes_serving(f, {"worker-a": 0, "worker-b": 0}), "every home drained", 90)
        await eventually(lambda: f.trafficmap_object() is None, "the TrafficMap deleted", 60)
        final = await f.handle().result()
        assert final["deleting"] is True
        with pytest.raises(kubernetes.client.ApiException):
            f.custom().get_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME)


async def placed(f: Fleet) -> Any:
    view = await f.status()
    placement = view.status.placement
    return view if placement is not None and placement.phase == "Placed" and view.phase == "Ready" else None


async def test_split_shares_the_floor_and_single_takes_one_home(dev_client: Client, task_queue: str) -> None:
    """`Split` puts `split.replicas` across the homes (3 -> 2 on worker-a, 1 on worker-b, the
    remainder to the first by name); `Single` takes one home, shown as `status.placement.cluster`
    with its endpoint; moving from one to the other drains the home placement no longer keeps."""
    async with fleet(dev_client, task_queue) as f:
        split = chat_manifest()
        split["spec"]["placement"].update({"mode": "Split", "split": {"replicas": 3}})
        await f.apply(split)
        await eventually(lambda: homes_serving(f, {"worker-a": 2, "worker-b": 1}), "2 + 1 serving", 90)
        view = await eventually(lambda: placed(f), "Split placed and ready", 60)
        homes = {home.cluster: home.replicas for home in view.status.placement.homes}
        assert homes == {"worker-a": 2, "worker-b": 1}
        assert view.status.placement.cluster is None
        await eventually(lambda: weights_are(f, {"worker-a": 2, "worker-b": 1}), "weights 2:1", 60)

        single = chat_manifest()
        single["spec"]["placement"]["mode"] = "Single"
        await f.apply(single)
        await eventually(lambda: homes_serving(f, {"worker-a": 2, "worker-b": 0}), "worker-a alone serves", 90)
        view = await eventually(lambda: placed(f), "Single placed and ready", 60)
        assert view.status.placement.cluster == "worker-a"
        assert view.status.placement.endpoint == f"{f.homes['worker-a'].gateway_url}/{NAMESPACE}/{NAME}"
        await eventually(lambda: weights_are(f, {"worker-a": 1}), "worker-a alone in the map", 60)
        await f.handle().signal("delete")
        await eventually(lambda: homes_serving(f, {"worker-a": 0}), "worker-a drained", 90)
