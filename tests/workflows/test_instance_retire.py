"""A teardown with no drain pause takes the old pod out of rotation and deletes it in one local
activity (`versions.RETIRE_IN_ONE_CALL`); with a drain pause, two calls with the pause between."""

from __future__ import annotations

import pytest

from models.instance import DeleteRequest, UpdateRequest
from tests.workflows.instance_harness import Harness, P

pytestmark = pytest.mark.workflows


@pytest.mark.parametrize(
    ("drain_seconds", "in_one_call"), [(0.0, True), (5.0, False)], ids=["no-drain", "drain"]
)
async def test_the_old_pod_leaves_rotation_before_it_is_deleted(
    harness: Harness, drain_seconds: float, in_one_call: bool
) -> None:
    # Started as the InferenceReplica starts it, under the newest version (the harness does).
    handle = await harness.start(harness.spec(drain_seconds=drain_seconds))
    await harness.until(handle, lambda s: s.phase == P.READY and s.serving)
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2", drain_seconds=drain_seconds)))
    await harness.until(handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2")
    old = "chat-engine-1-default-0"
    # The fake logs a serving write only on a pod it still has: out of rotation came first.
    assert (old, False) in harness.cluster.serving_log and harness.cluster.deleted == [old]
    assert harness.cluster.delete_calls == [((old,), in_one_call)]
    await handle.signal("delete", DeleteRequest())
    await handle.result()
