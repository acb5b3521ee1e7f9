"""A status back to the one the parent last took, while a report of another is still on its way
beside a step (`versions.REPORT_BACK_TO_DELIVERED`): reported again after it, so the parent is
not left holding the status in between."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness
from tests.workflows.instance_parent import FakeParent
from tests.workflows.instance_reports_probe import InstanceReportsProbe
from workers.worker import build_worker

pytestmark = pytest.mark.workflows


@pytest.mark.parametrize(
    ("back_to_delivered", "parent_hears"),
    [(True, ["Ready", "Updating", "Ready"]), (False, ["Ready", "Updating"])],
    ids=["reported-again", "before-the-change"],
)
async def test_a_status_back_to_the_delivered_one_is_reported_after_the_one_on_its_way(
    workflow_env: WorkflowEnvironment, task_queue: str, back_to_delivered: bool, parent_hears: list[str]
) -> None:
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    async with build_worker(
        workflow_env.client, task_queue, None, activities=cluster.activities(),
        extra_workflows=[FakeParent, InstanceReportsProbe],
    ):  # fmt: skip
        parent = await workflow_env.client.start_workflow(
            "FakeParent", id=f"irep/prod/chat-engine-{task_queue}", task_queue=task_queue
        )
        spec = Harness(workflow_env, cluster, task_queue).spec(parent_workflow_id=parent.id)
        await workflow_env.client.execute_workflow(
            "InstanceReportsProbe",
            args=[spec, back_to_delivered],
            id=f"probe-{task_queue}",
            task_queue=task_queue,
        )
        assert await parent.query("phases", result_type=list[str]) == parent_hears
