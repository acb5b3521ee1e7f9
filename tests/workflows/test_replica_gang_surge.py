"""Multi-pod SurgeThenDrain against kubesim: each leader+worker Instance is replaced by a new
Instance at a new index that serves before the old one drains (spec reference §7, §9), and a
replacement that cannot pull its image is abandoned while the old Instance keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workflows.service_harness import (
    IMAGE_2,
    NAMESPACE,
    Story,
    eventually,
    isvc_manifest,
    story,
    with_image,
)

pytestmark = pytest.mark.workflows

BAD_IMAGE = "docker.io/lmsysorg/sglang:does-not-exist"
GANG_SIZE = 2  # a leader and one worker
# Two attempts at a revision, the second 1 s after the first fails; a 1 s stuck-pod grace
# turns a pull failure into a failed attempt at once.
CLUSTER = {
    "drain_seconds": 0.2,
    "stuck_pod_grace_seconds": 1,
    "update_retry": {"max_attempts": 2, "attempt_delays_seconds": [1.0]},
}


def gang_manifest() -> dict[str, Any]:
    """Two leader+worker Instances; one surge slot; a replacement serves 2 s before taking over."""
    return isvc_manifest(
        leader={},
        worker={"size": 1},
        lifecycle={
            "minReadySeconds": 2,
            "updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}},
        },
    )


def live_pods(s: Story) -> list[Any]:
    return [p for p in s.pods() if p.metadata.deletion_timestamp is None]


def serving_instances(s: Story) -> dict[int, str]:
    """Index -> image of every Instance whose leader and worker both serve."""
    counts: Counter[int] = Counter()
    images: dict[int, str] = {}
    for pod in s.serving_pods():
        index = int(pod.metadata.labels["ome.io/instance-index"])
        counts[index] += 1
        images[index] = pod.spec.containers[0].image
    return {index: images[index] for index, count in counts.items() if count >= GANG_SIZE}


@dataclass
class Sampler:
    """Samples kubesim and the InferenceReplica's rows while an update runs."""

    s: Story
    fewest_serving: int = 99
    samples: int = 0
    steps: set[tuple[int, str]] = field(default_factory=set)
    """(index, step) of every `Update` operation seen on a row."""

    async def run(self) -> None:
        while True:
            self.fewest_serving = min(self.fewest_serving, len(serving_instances(self.s)))
            self.samples += 1
            with contextlib.suppress(Exception):  # a query racing a continue-as-new
                status = await self.s.replica_status()
                for row in status.instance_statuses:
                    if row.operation is not None and row.operation.type == "Update":
                        self.steps.add((row.index, row.operation.step or ""))
            await asyncio.sleep(0.1)


async def test_gang_surge_replaces_each_instance_at_a_new_index_and_abandons_a_bad_revision(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    # The new revision takes a moment to come up, so the handover is there to be seen.
    kubesim.set_image_behavior(IMAGE_2, ready_seconds=1.0)
    async with story(dev_client, task_queue, kubesim, cluster=CLUSTER) as s:
        manifest = gang_manifest()
        await s.apply(manifest)
        await eventually(lambda: sorted(serving_instances(s)) == [0, 1], "Instances 0 and 1 serving")
        first = {p.metadata.uid for p in live_pods(s)}
        assert len(first) == 2 * GANG_SIZE

        sampler = Sampler(s)
        task = asyncio.create_task(sampler.run())
        try:
            await s.apply(with_image(manifest, IMAGE_2))

            def moved() -> list[int] | None:
                serving = serving_instances(s)
                pods = live_pods(s)
                done = (
                    len(serving) == 2
                    and set(serving.values()) == {IMAGE_2}
                    and len(pods) == 2 * GANG_SIZE
                    and not {p.metadata.uid for p in pods} & first
                )
                return sorted(serving) if done else None

            indexes = await eventually(moved, "both Instances replaced on the new image", within=120)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Instance 1 (the highest) goes first, to the lowest free index, 2; Instance 0 follows
        # to the lowest index free by then (1, once Instance 1 is gone; 3 if it still drains).
        assert indexes in ([1, 2], [2, 3]), indexes
        assert sampler.samples > 10
        assert sampler.fewest_serving >= 2, f"only {sampler.fewest_serving} Instances served at one moment"
        # The source showed the §9 step while its replacement came up.
        assert any(step == "GangSurgeTarget" for _, step in sampler.steps), sampler.steps
        await eventually(
            lambda: _rolled_out(s, 2), "the InferenceReplica to show the rollout complete", within=60
        )

        # A revision whose image cannot be pulled: each replacement gives up and the old
        # Instance stays; the second attempt (a new replacement) fails too and holds it.
        before = {p.metadata.uid for p in live_pods(s)}
        sampler = Sampler(s)
        task = asyncio.create_task(sampler.run())
        try:
            await s.apply(with_image(manifest, BAD_IMAGE))
            status = await eventually(lambda: _held(s), "the bad revision to be Held", within=120)
            await eventually(
                lambda: {p.metadata.uid for p in s.pods()} == before,
                "the abandoned replacement's pods to be gone",
                within=60,
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert sampler.fewest_serving >= 2
        (block,) = status.retry_blocks
        assert block.state == "Held" and block.attempts_started == 2
        assert status.rollout_hold is not None and status.rollout_hold.gate == "Held"
        assert serving_instances(s) == dict.fromkeys(indexes, IMAGE_2)
        # Once the replacement's pods are gone, its source is back at rest on its revision.
        final = await eventually(lambda: _at_rest(s), "both Instances at rest", within=60)
        assert sorted(row.index for row in final.instance_statuses) == indexes
        # One Event per attempt; the same message again bumps its count, as Kubernetes does.
        abandoned = [
            e for e in s.core.list_namespaced_event(NAMESPACE).items if e.reason == "GangSurgeAbandoned"
        ]
        assert sum(e.count or 1 for e in abandoned) == 2
        assert all("stays on its revision" in e.message for e in abandoned)


async def _rolled_out(s: Story, count: int) -> Any:
    """Every Instance updated and the rollout closed: the current revision is the update one.

    `updated_replicas` reaches `count` while the last source still drains; the revision flips
    only once every handover has ended, on a later pass."""
    status = await s.replica_status()
    updated = status.updated_replicas == count and status.replicas == count
    if updated and status.rollout_hold is None and status.current_revision == status.update_revision:
        return status
    return None


async def _at_rest(s: Story) -> Any:
    status = await s.replica_status()
    rows = status.instance_statuses
    return status if all(row.phase == "Ready" and row.operation is None for row in rows) else None


async def _held(s: Story) -> Any:
    status = await s.replica_status()
    blocks = status.retry_blocks
    return status if blocks and blocks[0].state == "Held" else None
