"""Pause and resume end to end (spec reference §5): InferenceService signal -> InferenceReplica
`spec.paused` / `spec.pauseMode` -> every Instance, with the real activities against kubesim.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from models.instance import InstancePhase
from planning.service.pause import REFUSED_ALREADY_PAUSED
from tests.workflows.service_harness import (
    IMAGE_1,
    IMAGE_2,
    NAME,
    NAMESPACE,
    Story,
    eventually,
    isvc_manifest,
    story,
    with_image,
)

pytestmark = pytest.mark.workflows

POD = f"{NAME}-engine-0-default-0"
SURGE_POD = f"{NAME}-engine-0-default-1"


def events(s: Story, reason: str) -> list[str]:
    listed = s.core.list_namespaced_event(NAMESPACE)
    return [event.message for event in listed.items if event.reason == reason]


def ir_pause(s: Story) -> tuple[Any, Any]:
    spec = (s.object("inferencereplicas", f"{NAME}-engine") or {}).get("spec") or {}
    return spec.get("paused"), spec.get("pauseMode")


def live_images(s: Story) -> list[str]:
    return [p.spec.containers[0].image for p in s.pods() if p.metadata.deletion_timestamp is None]


async def ready_serving(s: Story, image: str) -> bool:
    status = await s.instance()
    return status.phase == InstancePhase.READY and status.serving and live_images(s) == [image]


async def test_freeze_holds_repairs_and_updates_and_is_never_downgraded(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        manifest = isvc_manifest(minReplicas=1, maxReplicas=1)
        await s.apply(manifest)
        await eventually(lambda: ready_serving(s, IMAGE_1), "one Ready engine Instance")

        # Not a pause: refused with an Event naming the value and the fix; nothing changes.
        await s.handle().signal("pause", "True")
        (refused,) = await eventually(lambda: events(s, "PauseRefused"), "the PauseRefused Event")
        assert '"True"' in refused and '"freeze"' in refused
        assert not (await s.status()).paused

        await s.handle().signal("pause", "freeze")
        await eventually(
            lambda: ir_pause(s) == (True, "Freeze"), "spec.pauseMode Freeze on the InferenceReplica"
        )
        await eventually(lambda: _instance_paused(s, "Freeze"), "the Instance to learn the freeze")
        view = await s.status()
        assert view.paused and view.phase == "Paused"

        # A plain pause on a frozen service is refused: the freeze is preserved.
        await s.handle().signal("pause")
        await eventually(
            lambda: REFUSED_ALREADY_PAUSED in events(s, "PauseRefused"), "the already-paused refusal"
        )
        assert ir_pause(s) == (True, "Freeze")
        assert (await s.instance()).pause_mode == "Freeze"

        # A spec change waits: no Instance starts an update while paused.
        await s.apply(with_image(manifest, IMAGE_2))
        # Restart policy None: a pod deleted during a pause is not replaced; the Instance is Pending.
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
        await eventually(lambda: _phase(s, InstancePhase.PENDING), "the Instance to rest Pending")
        status = await s.instance()
        assert status.target_revision == status.running_revision, (
            "the new revision did not reach the Instance"
        )
        assert live_images(s) == []

        # Resume removes the freeze: the Instance is rebuilt, then updated to the new image.
        await s.handle().signal("resume")
        await eventually(lambda: ir_pause(s) == (False, "Recover"), "the InferenceReplica to resume")
        await eventually(
            lambda: ready_serving(s, IMAGE_2), "the Instance rebuilt and on the new image", within=90
        )
        assert (await s.instance()).pause_mode is None
        assert events(s, "Resumed") and len(events(s, "Paused")) == 1


async def test_recover_pause_lets_a_lost_multi_pod_instance_be_recreated(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        manifest = isvc_manifest(
            minReplicas=1,
            maxReplicas=1,
            lifecycle={"restartPolicy": "RecreateInstanceOnPodRestart"},
        )
        await s.apply(manifest)
        await eventually(lambda: ready_serving(s, IMAGE_1), "one Ready engine Instance")
        await s.handle().signal("pause")
        await eventually(lambda: ir_pause(s) == (True, "Recover"), "spec.pauseMode Recover")
        await eventually(lambda: _instance_paused(s, "Recover"), "the Instance to learn the pause")
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
        # Repairs continue at `true`: the Instance is recreated with a new incarnation.
        await eventually(lambda: _incarnation(s, 2), "the Instance recreated during the pause", within=90)
        await s.handle().signal("resume")
        await s.handle().signal("resume")
        await eventually(lambda: events(s, "ResumeRefused"), "the second resume refused")


async def test_pause_during_surge_then_drain_keeps_both_pods_serving_until_resume(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        manifest = isvc_manifest(minReplicas=1, maxReplicas=1)
        await s.apply(manifest)
        await eventually(lambda: ready_serving(s, IMAGE_1), "one Ready engine Instance")
        # The new image takes a while to get ready, so the pause lands while the surge is in flight.
        kubesim.set_image_behavior(IMAGE_2, ready_seconds=8.0)
        await s.apply(with_image(manifest, IMAGE_2))
        await eventually(lambda: SURGE_POD in [p.metadata.name for p in s.pods()], "the surge pod")
        lowest_serving = 1

        async def watch_serving() -> None:
            nonlocal lowest_serving
            while True:
                lowest_serving = min(lowest_serving, len(s.serving_pods()))
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch_serving())
        try:
            await s.handle().signal("pause")
            await eventually(lambda: _surge_held(s), "the surge to stop before the old pod drains", within=90)
            assert sorted(p.metadata.name for p in s.serving_pods()) == [POD, SURGE_POD]
            status = await s.instance()
            assert status.phase == InstancePhase.UPDATING and status.serving_pods == 1
            await s.handle().signal("resume")
            await eventually(
                lambda: ready_serving(s, IMAGE_2), "the update to finish after resume", within=90
            )
        finally:
            watcher.cancel()
        assert [p.metadata.name for p in s.pods()] == [SURGE_POD]
        assert lowest_serving >= 1, "the old pod drained only after the new one served"


async def _surge_held(s: Story) -> bool:
    operation = (await s.instance()).operation
    return (
        operation is not None
        and operation.step == "SurgeDrain"
        and operation.waiting == "Paused"
        and len(s.serving_pods()) == 2
    )


async def _instance_paused(s: Story, mode: str) -> bool:
    return (await s.instance()).pause_mode == mode


async def _phase(s: Story, phase: InstancePhase) -> bool:
    return (await s.instance()).phase == phase


async def _incarnation(s: Story, incarnation: int) -> bool:
    status = await s.instance()
    return status.incarnation == incarnation and status.phase == InstancePhase.READY and status.serving
