"""The placement source against members that end on their own, and a service un-routed.

- A member that can no longer be signalled (terminated) never reports its deletion: deleting
  the source must not wait for it forever.
- A member deleted on its own (a `delete` sent to it directly) while placement keeps its home
  is started again.
- `spec.routing.enabled: false` applied to a routed service deletes its TrafficMap (§17:
  "Deleted when un-routed"): the route is withdrawn rather than kept published from a map
  nobody updates any more.
"""

from __future__ import annotations

import copy

from temporalio.client import Client, WorkflowExecutionStatus

from tests.workflows.multicluster_harness import Fleet, chat_manifest, fleet, homes_serving_counts
from tests.workflows.service_harness import eventually


async def closed(f: Fleet, cluster: str | None = None) -> bool:
    described = await f.handle(cluster).describe()
    return described.status != WorkflowExecutionStatus.RUNNING


async def test_deleting_the_source_does_not_wait_for_a_member_that_is_gone(dev_client: Client, task_queue: str) -> None:
    async with fleet(dev_client, task_queue) as f:
        await f.apply(chat_manifest())
        await eventually(lambda: homes_serving_counts(f, {"worker-a": 2, "worker-b": 2}), "two per home", 90)
        await f.handle("worker-b").terminate(reason="test: the member is gone")
        await f.handle().signal("delete")
        await eventually(lambda: homes_serving_counts(f, {"worker-a": 0}), "worker-a drained", 90)
        await eventually(lambda: closed(f), "the source finished deleting", 60)
        await eventually(lambda: f.trafficmap_object() is None, "the TrafficMap deleted", 60)


async def test_a_member_deleted_on_its_own_is_started_again(dev_client: Client, task_queue: str) -> None:
    async with fleet(dev_client, task_queue) as f:
        await f.apply(chat_manifest())
        await eventually(lambda: homes_serving_counts(f, {"worker-a": 2, "worker-b": 2}), "two per home", 90)
        first = (await f.handle("worker-b").describe()).run_id
        await f.handle("worker-b").signal("delete")

        async def restarted() -> bool:
            described = await f.handle("worker-b").describe()
            return described.run_id != first and described.status == WorkflowExecutionStatus.RUNNING

        # Its deletion report starts it again (before: the home stayed without a member).
        await eventually(restarted, "worker-b's member started again", 90)
        await eventually(lambda: homes_serving_counts(f, {"worker-b": 2}), "worker-b serves again", 90)


async def test_unrouting_a_service_deletes_its_trafficmap(dev_client: Client, task_queue: str) -> None:
    async with fleet(dev_client, task_queue) as f:
        await f.apply(chat_manifest())
        await eventually(lambda: f.trafficmap_object() is not None, "the TrafficMap written", 60)
        unrouted = copy.deepcopy(chat_manifest())
        unrouted["spec"]["routing"] = {"enabled": False}
        result = await f.apply(unrouted)
        assert result.accepted and result.changed

        async def map_gone() -> bool:
            described = await f.trafficmap().describe()
            return described.status == WorkflowExecutionStatus.COMPLETED and f.trafficmap_object() is None

        await eventually(map_gone, "the TrafficMap workflow ended and its object deleted", 60)

        # Routed again: a new map.
        await f.apply(chat_manifest())

        async def map_back() -> bool:
            described = await f.trafficmap().describe()
            return described.status == WorkflowExecutionStatus.RUNNING and f.trafficmap_object() is not None

        await eventually(map_back, "a new TrafficMap once routed again", 60)
