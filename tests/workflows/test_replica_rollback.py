"""A canary rollback on kubesim: an InferenceReplica moved to a canary revision under a rollout
run's cap goes back to its stable revision when the run sets `Coordination.rollback_to`,
while the spec it is configured with still names the canary (spec reference §1.5).

The InferenceReplica is driven directly, as its InferenceService would drive it: `configure`
signals carrying the coordination a Rollout run would send. Real activities, kubesim, and
the pod relay in place of the watcher.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowHandle

from kubesim.handle import KubeSim
from models.inferencereplica import InferenceReplicaStatus
from models.inferenceservice import InferenceService
from models.pods import LABEL_INSTANCE_INDEX
from models.resolution import inference_replica_spec
from models.runtime import ServingRuntimeSpec
from planning.replica.coordination import Coordination
from planning.replica.template import ClusterLifecycle
from planning.service.components import plan_components
from tests.workflows.service_harness import (
    FAST_CLUSTER,
    IMAGE_1,
    IMAGE_2,
    NAME,
    Story,
    eventually,
    isvc_manifest,
    runtime_manifest,
    story,
    with_image,
)
from workflows.names import irep_workflow_id
from workflows.replica.messages import SIGNAL_CONFIGURE, ReplicaConfig
from workflows.replica.workflow import InferenceReplicaWorkflow

pytestmark = pytest.mark.workflows


def replica_config(s: Story, image: str, generation: int, coordination: Coordination | None = None) -> ReplicaConfig:
    """The engine's config as the InferenceService would send it for the spec 003 example on `image`."""
    manifest = with_image(isvc_manifest(), image)
    manifest["metadata"]["namespace"] = s.namespace
    isvc = InferenceService.model_validate(manifest)
    runtime = ServingRuntimeSpec.model_validate(runtime_manifest()["spec"])
    plan = next(p for p in plan_components(isvc, runtime) if p.name == "engine")
    return ReplicaConfig(
        namespace=s.namespace,
        isvc=NAME,
        component="engine",
        generation=generation,
        component_spec=plan.effective.model_dump(mode="json", exclude_none=True),
        ir_spec=inference_replica_spec(isvc, runtime, "engine"),
        revision_hash=plan.revision_hash,
        revision_name=plan.revision_name,
        cluster=ClusterLifecycle.model_validate(FAST_CLUSTER),
        coordination=coordination,
    )


def serving_images(s: Story) -> list[str]:
    return sorted(p.spec.containers[0].image for p in s.serving_pods())


def images_by_index(s: Story) -> dict[int, str]:
    """The image each Instance's live pods run, by Instance index."""
    found: dict[int, str] = {}
    for pod in s.pods():
        if pod.metadata.deletion_timestamp is None:
            found[int(pod.metadata.labels[LABEL_INSTANCE_INDEX])] = pod.spec.containers[0].image
    return found


async def status(handle: WorkflowHandle[Any, Any]) -> InferenceReplicaStatus:
    return await handle.query(InferenceReplicaWorkflow.status)


async def test_a_canary_rollback_returns_every_instance_to_the_stable_image_serving_throughout(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"rollback-{uuid4().hex[:6]}"
    async with story(dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace) as s:
        stable = replica_config(s, IMAGE_1, 1)
        handle = await s.client.start_workflow(
            InferenceReplicaWorkflow.run,
            stable,
            id=irep_workflow_id(namespace, NAME, "engine"),
            task_queue=task_queue,
        )

        async def on_stable() -> bool:
            shown = await status(handle)
            return serving_images(s) == [IMAGE_1] * 2 and shown.ready_replicas == 2

        await eventually(on_stable, "two Instances serving the stable image", within=60)

        # The canary: a run moves the engine to revision B, one Instance of two.
        a, a_name = stable.revision_hash, stable.revision_name
        canary_config = replica_config(s, IMAGE_2, 2)
        b = canary_config.revision_hash
        assert a != b
        canary = Coordination(run=2, target=b, limit=1, stable=a)
        await handle.signal(SIGNAL_CONFIGURE, canary_config.model_copy(update={"coordination": canary}))

        async def one_on_canary() -> InferenceReplicaStatus | None:
            shown = await status(handle)
            # Once the surge has drained its old pod, the run's cap is what holds the other one.
            held = shown.rollout_hold is not None and shown.rollout_hold.reason.startswith("rollout run 2 ")
            on_b = shown.updated_replicas == 1 and held
            return shown if on_b and serving_images(s) == [IMAGE_1, IMAGE_2] else None

        shown = await eventually(one_on_canary, "one Instance serving the canary image", within=60)
        assert shown.rollout_hold is not None and shown.rollout_hold.gate == "Budget"
        assert shown.rollout_hold.reason == f"rollout run 2 allows 1 Instances on {b} now"
        # The highest index carries the canary; the lowest holds the stable revision.
        assert images_by_index(s) == {0: IMAGE_1, 1: IMAGE_2}
        assert (shown.current_revision, shown.update_revision) == (a_name, canary_config.revision_name)

        # The rollback: the spec still names B; the run sends its canary capacity (0) and rollback_to.
        lowest = 2
        surged = False
        shown_updates: set[str | None] = set()

        async def sample_pods() -> None:
            # Apart from the status queries, so that a slow query does not hide a short surge.
            nonlocal lowest, surged
            while True:
                lowest = min(lowest, len(s.serving_pods()))
                # SurgeThenDrain: Instance 1's stable pod is up beside its canary pod.
                surged = surged or {IMAGE_1, IMAGE_2} <= {
                    p.spec.containers[0].image
                    for p in s.pods()
                    if p.metadata.labels[LABEL_INSTANCE_INDEX] == "1" and p.metadata.deletion_timestamp is None
                }
                await asyncio.sleep(0.01)

        async def sample_status() -> None:
            while True:
                shown_updates.add((await status(handle)).update_revision)
                await asyncio.sleep(0.05)

        sampler = asyncio.gather(sample_pods(), sample_status())
        back = Coordination(run=2, target=b, limit=0, stable=a, rollback_to=a)
        await handle.signal(SIGNAL_CONFIGURE, canary_config.model_copy(update={"coordination": back}))

        async def rolled_back() -> InferenceReplicaStatus | None:
            shown = await status(handle)
            ready = shown.condition("Ready")
            done = (
                images_by_index(s) == {0: IMAGE_1, 1: IMAGE_1}
                and serving_images(s) == [IMAGE_1] * 2
                and shown.updated_replicas == 2
                and ready is not None
                and ready.reason == "AllInstancesReady"
            )
            return shown if done else None

        try:
            shown = await eventually(rolled_back, "both Instances back on the stable image", within=60)
        finally:
            sampler.cancel()
        assert lowest >= 2, f"serving dropped to {lowest} during the rollback"
        assert surged, "the stable pod comes up before the canary pod drains"
        assert (shown.current_revision, shown.update_revision) == (a_name, a_name)
        assert shown.rollout_hold is None
        assert shown_updates <= {a_name, canary_config.revision_name}
        assert a_name in shown_updates

        # A rollback to a revision this InferenceReplica never had: nothing moves, the hold says why.
        gone = "0" * len(a)
        await handle.signal(
            SIGNAL_CONFIGURE, canary_config.model_copy(update={"coordination": Coordination(2, b, 0, rollback_to=gone)})
        )

        async def held() -> InferenceReplicaStatus | None:
            shown = await status(handle)
            return shown if shown.rollout_hold is not None and shown.rollout_hold.gate == "Held" else None

        shown = await eventually(held, "the impossible rollback to hold")
        assert shown.rollout_hold is not None
        assert shown.rollout_hold.reason == (
            f"rollback to {gone} impossible: the stable revision is no longer retained (StableRevisionMissing)"
        )
        await asyncio.sleep(1.0)
        assert images_by_index(s) == {0: IMAGE_1, 1: IMAGE_1}, "a missing stable revision moved an Instance"
