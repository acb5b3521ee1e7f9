"""InferenceReplica operations through the InferenceService's signals, against kubesim:
transient scale, pause holding an update until resume, a held revision and its release,
and `reset_instances` with the spec's events.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
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
from workflows.service.messages import ReleaseHeldRequest, ResetInstancesRequest, ScaleRequest

pytestmark = pytest.mark.workflows

BAD_IMAGE = "docker.io/lmsysorg/sglang:does-not-exist"
# No updateRetry (a manifest install): the first failure that is the revision's fault holds it;
# a 1 s stuck-pod grace turns an image that cannot be pulled into a failure at once.
HOLD_AT_ONCE = {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 1, "update_retry": None}


def indexes(s: Story) -> list[int]:
    live = [p for p in s.pods() if p.metadata.deletion_timestamp is None]
    return sorted(int(p.metadata.labels["ome.io/instance-index"]) for p in live)


async def ready_count(s: Story) -> int:
    lifecycle = (await s.status()).status.components["engine"].lifecycle
    return lifecycle.ready_replicas if lifecycle is not None else -1


def events(s: Story, reason: str) -> list[str]:
    listed = s.core.list_namespaced_event(NAMESPACE)
    return [e.message for e in listed.items if e.reason == reason]


async def test_scale_takes_lowest_free_indexes_and_pause_holds_an_update_until_resume(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        manifest = isvc_manifest(minReplicas=1, maxReplicas=3)
        await s.apply(manifest)
        await eventually(lambda: _ready_exactly(s, [0]), "one Ready Instance")

        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=3))
        await eventually(lambda: _ready_exactly(s, [0, 1, 2]), "three Instances at indexes 0, 1, 2")
        irep = s.object("inferencereplicas", f"{NAME}-engine")
        assert irep is not None and irep["spec"]["replicas"] == 3
        assert any("Instances 1 -> 3 (scale)" in message for message in events(s, "Scaled"))

        # Scale-down removes from the end of the keep order: Ready and low indexes stay.
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        await eventually(lambda: _ready_exactly(s, [0, 1]), "Instance 2 drained and removed")

        # The next apply sets the count again: back to minReplicas.
        await s.apply(manifest)
        await eventually(lambda: _ready_exactly(s, [0]), "the apply to end the transient scale")

        # Paused: the new revision waits; resumed: it rolls out.
        await s.handle().signal("pause")
        result = await s.apply(with_image(manifest, IMAGE_2))
        assert result.changed
        view = await eventually(lambda: _phase(s, "Paused"), "the InferenceService to show Paused")
        assert view.paused
        irep = await eventually(lambda: _paused_irep(s), "the InferenceReplica spec to show paused")
        assert irep["spec"]["pauseMode"] == "Recover"
        await asyncio.sleep(2)  # a window in which an unpaused update would have started
        assert {p.spec.containers[0].image for p in s.pods()} == {IMAGE_1}
        await s.handle().signal("resume")
        await eventually(
            lambda: _images(s) == {IMAGE_2} and _ready_exactly(s, [0]), "the held update after resume"
        )


async def test_held_revision_stays_held_until_release_or_replacement(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    async with story(dev_client, task_queue, kubesim, cluster=HOLD_AT_ONCE) as s:
        manifest = isvc_manifest()
        await s.apply(manifest)
        await eventually(lambda: _ready_exactly(s, [0, 1]), "two Ready Instances")

        await s.apply(with_image(manifest, BAD_IMAGE))
        status = await eventually(lambda: _held(s), "the bad revision to be Held", within=60)
        hold = status.rollout_hold
        assert hold is not None and hold.gate == "Held"
        assert "held after 1 failed attempt(s) (last failure: " in hold.reason
        (block,) = status.retry_blocks
        assert block.state == "Held" and block.target_revision == status.update_revision
        # SurgeThenDrain never took the old pods away: both Instances still serve.
        assert status.serving_replicas == 2
        held_since = hold.since
        await eventually(lambda: events(s, "RetryHeld"), "the RetryHeld event")

        # A release of a revision with no block is skipped with the spec's message.
        await s.handle().signal("release_held", ReleaseHeldRequest(component="engine", revision="deadbeef"))
        skipped = await eventually(lambda: events(s, "RetryBlockReleaseSkipped"), "RetryBlockReleaseSkipped")
        assert 'release requested for revision "deadbeef" but no retryBlock exists for it' in skipped[0]

        # Releasing the held revision lets it retry (and, still broken, it is held again).
        assert status.update_revision is not None
        await s.handle().signal(
            "release_held", ReleaseHeldRequest(component="engine", revision=status.update_revision)
        )
        released = await eventually(lambda: events(s, "RetryBlockReleased"), "RetryBlockReleased")
        assert (
            f"Held retryBlock for revision {status.update_revision} removed at operator request"
            in released[0]
        )
        again = await eventually(lambda: _held(s), "the retried revision to be Held again", within=60)
        assert again.rollout_hold is not None and again.rollout_hold.since >= held_since
        # One event per release, the InferenceReplica's (spec §11): its two Instances, both
        # holding the block, lift it without recording their own.
        assert events(s, "RetryBlockReleased") == [
            f"InferenceReplica {NAMESPACE}/{NAME}-engine component=engine: Held retryBlock for revision "
            f"{status.update_revision} removed at operator request (ome.io/release-held-revision annotation)"
        ]

        # A new revision replaces the held one: the hold goes and the Instances move.
        await s.apply(with_image(manifest, IMAGE_2))
        await eventually(
            lambda: _images(s) == {IMAGE_2} and _ready_exactly(s, [0, 1]), "the corrected revision"
        )
        final = await s.replica_status()
        assert final.rollout_hold is None and final.retry_blocks == []


async def test_reset_instances_answers_with_the_spec_events(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    async with story(dev_client, task_queue, kubesim, cluster=HOLD_AT_ONCE) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await eventually(lambda: _ready_exactly(s, [0]), "one Ready Instance")
        ir = f"InferenceReplica {NAMESPACE}/{NAME}-engine component=engine"

        await s.handle().signal("reset_instances", ResetInstancesRequest(component="engine", instances="0,x"))
        rejected = await eventually(lambda: events(s, "InstancesResetRejected"), "InstancesResetRejected")
        assert rejected == [
            f'{ir}: ome.io/reset-instances="0,x" rejected: "x" is not a non-negative instance index; nothing reset'
        ]

        await s.handle().signal("reset_instances", ResetInstancesRequest(component="engine", instances="0,7"))
        skipped = await eventually(lambda: events(s, "InstancesResetSkipped"), "InstancesResetSkipped")
        assert skipped == [f"{ir}: reset skipped for instance(s) 0 (still serving), 7 (no such instance)"]

        await s.handle().signal("reset_instances", ResetInstancesRequest(component="engine", instances="all"))
        await eventually(
            lambda: f"{ir}: none is Failed; nothing to reset" in events(s, "InstancesResetSkipped"),
            "the `all` answer",
        )


async def _ready_exactly(s: Story, wanted: list[int]) -> bool:
    status = await s.replica_status()
    rows = [row for row in status.instance_statuses if row.phase == "Ready"]
    return (
        sorted(row.index for row in rows) == wanted
        and len(status.instance_statuses) == len(wanted)
        and (indexes(s) == wanted)
    )


async def _phase(s: Story, phase: str) -> Any:
    view = await s.status()
    return view if view.phase == phase else None


def _paused_irep(s: Story) -> dict[str, Any] | None:
    irep = s.object("inferencereplicas", f"{NAME}-engine")
    return irep if irep is not None and irep["spec"].get("paused") else None


def _images(s: Story) -> set[str]:
    return {p.spec.containers[0].image for p in s.pods() if p.metadata.deletion_timestamp is None}


async def _held(s: Story) -> Any:
    status = await s.replica_status()
    hold = status.rollout_hold
    return status if hold is not None and hold.gate == "Held" else None


async def test_a_failed_instance_is_answered_by_reset_and_repaired_by_a_new_revision(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    async with story(dev_client, task_queue, kubesim, cluster=HOLD_AT_ONCE) as s:
        broken = isvc_manifest(minReplicas=1, maxReplicas=1, runner={"image": BAD_IMAGE})
        await s.apply(broken)
        failed = await eventually(lambda: _instance(s, 0, "Failed"), "Instance 0 to fail on its image")
        assert failed.last_failure is not None and failed.last_failure.reason in (
            "ErrImagePull",
            "ImagePullBackOff",
        )
        status = await s.replica_status()
        assert status.condition("Ready") is not None and status.condition("Ready").reason == "InstanceFailed"  # type: ignore[union-attr]
        ir = f"InferenceReplica {NAMESPACE}/{NAME}-engine component=engine"

        # Its failed create left no pods and no operation behind: the spec's answer is a skip.
        await s.handle().signal("reset_instances", ResetInstancesRequest(component="engine", instances="all"))
        skipped = await eventually(lambda: events(s, "InstancesResetSkipped"), "InstancesResetSkipped")
        assert skipped == [f"{ir}: reset skipped for instance(s) 0 (nothing to reset)"]

        # A corrected revision replaces the held one and the Failed Instance moves to it.
        await s.apply(with_image(broken, IMAGE_2))
        await eventually(
            lambda: _images(s) == {IMAGE_2} and _ready_exactly(s, [0]), "Instance 0 Ready on the fix"
        )


async def _instance(s: Story, index: int, phase: str) -> Any:
    rows = [row for row in (await s.replica_status()).instance_statuses if row.index == index]
    return rows[0] if rows and rows[0].phase == phase else None
