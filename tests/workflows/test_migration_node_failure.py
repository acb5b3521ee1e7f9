"""A node failing during a migration (issue 13): the migration ends as spec reference §13
says, and the component never ends with two serving copies of the Instance, or none.

- The replacement's node fails before it serves: the migration fails at its deadline
  (`MigrationExpired`, `deadline exceeded in phase SurgePending: ...`) or when the
  replacement fails (`MigrationSurgeWedged`), the replacement goes, the source serves on.
- The source's node fails while the replacement comes up: the replacement comes up elsewhere,
  the lost source is drained (its pods force-deleted off the dead node) and the migration
  completes.

kubesim is shared by the session's tests: a failed node is restored in `finally`, and the
Instances run an image of their own whose containers start slowly, so the failure lands while
the replacement is still coming up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from models.migration import MigrationProgress
from models.pods import LABEL_INSTANCE_INDEX
from tests.workflows.service_harness import FAST_CLUSTER, Story, engine_ready, eventually, story
from tests.workflows.test_migration import ended, migrate, serving_by_index, spread_free

pytestmark = pytest.mark.workflows

SLOW_IMAGE = "docker.io/lmsysorg/sglang:v0.4.6-slow-start"
"""Containers of this image take `START_SECONDS` to start: time for a node to fail first."""
START_SECONDS = 3.0


@contextlib.contextmanager
def failed(sim: KubeSim, node: str) -> Iterator[None]:
    sim.fail_node(node)
    try:
        yield
    finally:
        sim.restore_node(node)


def surge_pod(s: Story, index: int) -> Any:
    """The live pod of Instance `index` once it is scheduled, else None."""
    for pod in s.pods():
        if int(pod.metadata.labels[LABEL_INSTANCE_INDEX]) == index and pod.spec.node_name:
            if pod.metadata.deletion_timestamp is None:
                return pod
    return None


def nodes(s: Story) -> list[str]:
    return sorted(node.metadata.name for node in s.core.list_node().items)


async def test_the_replacements_node_failing_ends_the_migration_and_keeps_the_source(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"migfail-{uuid4().hex[:6]}"
    kubesim.set_image_behavior(SLOW_IMAGE, start_seconds=START_SECONDS)
    manifest = spread_free(namespace, runner={"image": SLOW_IMAGE}, lifecycle={"instanceReadyTimeout": "12s"})
    async with story(dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace) as s:
        assert (await s.apply(manifest)).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        placed = serving_by_index(s)
        target = next(n for n in nodes(s) if n not in placed.values())
        started = await migrate(
            s, {"component": "engine", "instance": 1, "from_node": placed[1], "hint_target_nodes": [target]}
        )
        pod = await eventually(lambda: surge_pod(s, 2), "the replacement scheduled on the hinted node")
        assert pod.spec.node_name == target
        fewest = 2
        with failed(kubesim, target):

            async def over() -> MigrationProgress | None:
                nonlocal fewest
                fewest = min(fewest, len(serving_by_index(s)))
                progress = MigrationProgress.model_validate(
                    await s.client.get_workflow_handle(started.workflow_id).query("status")
                )
                return progress if progress.phase.terminal else None

            progress = await eventually(over, "the migration ends", within=60)
            assert progress.phase == "Failed", progress
            assert progress.reason in ("MigrationExpired", "MigrationSurgeWedged"), progress
            if progress.reason == "MigrationExpired":
                assert progress.message.startswith("deadline exceeded in phase SurgePending: "), progress
            else:
                assert progress.message.endswith(" past the stuck-pod grace"), progress
            assert (await ended(s, started.workflow_id)).phase == "Failed"

            async def source_alone() -> bool:
                nonlocal fewest
                serving = serving_by_index(s)
                fewest = min(fewest, len(serving))
                ir = s.object("inferencereplicas", f"{s.name}-engine") or {}
                return sorted(serving) == [0, 1] and (ir.get("status") or {}).get("replicas") == 2

            await eventually(source_alone, "the source serving, the replacement gone", within=60)
        assert fewest == 2, "the source must serve throughout"
        assert serving_by_index(s)[1] == placed[1]


async def test_the_sources_node_failing_completes_the_migration_with_one_copy(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"migsrc-{uuid4().hex[:6]}"
    kubesim.set_image_behavior(SLOW_IMAGE, start_seconds=START_SECONDS)
    cluster = {**FAST_CLUSTER, "force_delete": {"overdue_slack_seconds": 1, "node_unreachable_threshold_seconds": 1}}
    manifest = spread_free(namespace, runner={"image": SLOW_IMAGE})
    async with story(dev_client, task_queue, kubesim, cluster=cluster, namespace=namespace) as s:
        assert (await s.apply(manifest)).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        placed = serving_by_index(s)
        started = await migrate(s, {"component": "engine", "instance": 1, "from_node": placed[1]})
        await eventually(lambda: surge_pod(s, 2), "the replacement scheduled")
        with failed(kubesim, placed[1]):
            progress = await ended(s, started.workflow_id)
            assert progress.phase == "Completed", progress
            assert progress.message == "migrated to instance=2"

            async def one_copy() -> bool:
                listed = {int(p.metadata.labels[LABEL_INSTANCE_INDEX]) for p in s.pods()}
                return sorted(serving_by_index(s)) == [0, 2] and 1 not in listed

            await eventually(one_copy, "Instances 0 and 2 serving, Instance 1 gone", within=60)
