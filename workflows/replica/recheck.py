"""The InferenceReplica's re-list of its component's pods: the safety net for a pod change
the watcher's signal never delivered to a resting Ready Instance.

On its slow timer (`planning.replica.recheck.RECHECK_INTERVAL`) the InferenceReplica lists
the component's pods with one request, compares them with each resting Instance's last
report (`stale_views`), and for each Instance that disagrees lists its pods in full (nodes
and endpoints, as the Instance itself would) and sends that summary as `pods_changed` (at most `MAX_RELISTS_PER_PASS` a pass). The
Instance takes it if it is newer than what it has; a pod gone or failed is then confirmed
and repaired as if the watcher had told it. Instances started under the net carry
`relisted_by_parent` and rest with no timer of their own.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

from models.instance import SIGNAL_PODS_CHANGED
from models.kube_ops import ListComponentPodsInput, ListInstancePodsInput
from models.pods import InstancePods
from planning.replica.recheck import relist_batch, stale_views
from workflows import kube_calls
from workflows.replica import view
from workflows.replica.children import send_all, signal_instance
from workflows.replica.messages import ReplicaState


async def recheck_pods(state: ReplicaState) -> list[int]:
    """One re-list of the component; the indexes of the Instances sent a fresh summary (at
    most `MAX_RELISTS_PER_PASS`, the rest in the next pass). A failed listing is logged and
    skipped: the next interval tries again, and the loop goes on."""
    config = state.config
    name = f"{config.isvc}-{config.component}"
    try:
        listed = await kube_calls.list_component_pods(
            ListComponentPodsInput(namespace=config.namespace, isvc=config.isvc, component=config.component),
            summary=f"safety re-list of the pods of {name}",
        )
        stale = relist_batch(stale_views(view.reports(state), listed), state.relisted_up_to)
        if not stale:
            return []
        fresh = await list_in_full(state, stale)
    except ActivityError as error:
        workflow.logger.warning("safety re-list of the pods of %s failed: %s", name, error.cause or error)
        return []
    state.relisted_up_to = stale[-1]
    await send_all([signal_instance(config, index, SIGNAL_PODS_CHANGED, pods) for index, pods in zip(stale, fresh, strict=True)])
    return stale


async def list_in_full(state: ReplicaState, indexes: list[int]) -> list[InstancePods]:
    """The full pod summaries of the Instances at `indexes`, listed together."""
    config = state.config
    lists = [
        kube_calls.list_instance_pods(
            ListInstancePodsInput(namespace=config.namespace, isvc=config.isvc, component=config.component, index=index),
            summary=f"list pods of {config.isvc}-{config.component}-{index}: its last report disagrees",
        )
        for index in indexes
    ]
    return list(await asyncio.gather(*lists))
