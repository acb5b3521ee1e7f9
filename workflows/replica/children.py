"""How the InferenceReplica workflow reaches its `Instance` children: their spec, their start,
and a signal to one of them.

Every start and signal of a pass goes out in one workflow task (`send_all`): the commands
are issued in the order the plan lists them; awaiting each in turn would cost a task per
Instance. What is sent is folded into the state by the caller (or, for a start, here, before
the start), so a pass while it is in flight counts it already.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferenceservice import ComponentSpec
from models.instance import INSTANCE_WORKFLOW_VERSION, InstanceSpec
from planning.instance.state import InstanceState
from planning.replica.migration_views import placed_away
from planning.replica.relocation import avoided
from planning.replica.template import InstanceIdentity, instance_spec
from workflows import search_attributes
from workflows.names import INSTANCE, instance_workflow_id
from workflows.replica import view
from workflows.replica.messages import ReplicaConfig, ReplicaState

REPLICA_POD_NET = "replica-pod-net"
"""`workflow.patched` id: the component re-list (`workflows.replica.recheck`) replaces the
five-minute safety pass, and Instances started or updated from then on rest Ready without
their own re-list (`relisted_by_parent`). Runs from before keep both, and Instances already
running keep their five-minute re-list until the InferenceReplica next starts or updates them:
the flag is not in `planning.replica.lifecycle.LIFECYCLE_FIELDS`, so no resend wave follows a
deploy (and the replayed lifecycle digests stay as recorded)."""


def runs_pod_net() -> bool:
    """Whether this run re-lists for its Instances (from `run` and handlers, never a query)."""
    return workflow.patched(REPLICA_POD_NET)


RUN_LIMITS = "replica-run-limits"
"""`workflow.patched` id: a run starts at most `CHILDREN_PER_RUN` Instances and then continues
as new. Asked only where the limit cuts or is reached, so runs that never reach it leave no
marker; runs from before started all a pass planned, as their histories recorded."""
SENDS_IN_WAVES = "replica-sends-in-waves"
"""`workflow.patched` id: a pass sends at most `SENDS_PER_TASK` starts and signals in one
workflow task. Asked only where a pass has more; an id of its own, so a run that replayed a
pass of more sends from before still gets the children's limit when it first needs it (a
patch asked during replay stays off for the rest of that run)."""
CHILDREN_PER_RUN = 1000
"""Instances one run starts before it continues as new. An Instance outlives the start (it is
an abandoned child), so the server counts it against the run that started it for as long as
it runs, and refuses a workflow task that would take a run past
`limit.numPendingChildExecutions.error` (2,000 by default, on Temporal Cloud too): a
component of more Instances would otherwise stop starting them for good. A new run counts
from zero. A pass's new Instances and gang surges are cut to what is left
(`planning.replica.batching.within_room`); half the server's default leaves room for the
replacements a pass's migrations start, which are not cut."""
SENDS_PER_TASK = 500
"""Starts and signals one workflow task sends. The server refuses a task that would leave a
run with more than `limit.numPendingSignals.error` (2,000) signals it has not yet delivered,
and a pause told to a component of 2,500 Instances is 2,500 signals: more go out in waves,
each once the one before was delivered."""


@dataclass
class RunChildren:
    """What this run did with its children that a run after continue-as-new starts without:
    the Instances that reported their end in it (its starts find nothing still closing) and
    how many it started (the server counts only the run's own).

    Written by the `instance_changed` handler (`ended`) and by `start_instance`.
    """

    ended: set[int] = field(default_factory=set)
    """Indexes whose Instance reported its end: its workflow may still be closing, so a start
    at that index that finds it running is tried again. Cleared per index by a start there."""
    start_again: bool = False
    """Set by `start_instance` when such a start found the old workflow still closing: the
    pass wakes shortly to try it again. Cleared by the pass before it starts anything."""
    started: int = 0
    """Instance starts this run sent (`CHILDREN_PER_RUN`)."""

    def room(self) -> int:
        """How many more Instances this run may start."""
        return max(0, CHILDREN_PER_RUN - self.started)

    def hands_over(self) -> bool:
        """Whether this run has started all it may, so it continues as new before more starts
        (from `RUN_LIMITS` on; asked only then)."""
        if self.started < CHILDREN_PER_RUN or not workflow.patched(RUN_LIMITS):
            return False
        workflow.logger.info(
            "this run started %d Instances, the most one run starts (CHILDREN_PER_RUN): continuing as new", self.started
        )
        return True


async def send_all(sends: Sequence[Awaitable[object]]) -> None:
    """Await `sends` together, so their commands leave in one workflow task, in order; more
    than `SENDS_PER_TASK` go out in waves of that many (from `SENDS_IN_WAVES` on)."""
    if len(sends) <= SENDS_PER_TASK or not workflow.patched(SENDS_IN_WAVES):
        await asyncio.gather(*sends)
        return
    for first in range(0, len(sends), SENDS_PER_TASK):
        await asyncio.gather(*sends[first : first + SENDS_PER_TASK])


async def signal_instance(config: ReplicaConfig, index: int, name: str, payload: Any) -> None:
    """Signal Instance `index`; one that already ended needs nothing, so a failure is logged."""
    workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index, config.home)
    try:
        await workflow.get_external_workflow_handle(workflow_id).signal(name, payload)
    except Exception as error:  # noqa: BLE001 - an Instance that already ended needs nothing
        workflow.logger.warning("signal %s to %s failed: %s", name, workflow_id, error)


def spec_for(state: ReplicaState, index: int, revision_hash: str, gang_surge_of: int | None = None) -> InstanceSpec:
    """The spec of Instance `index` on `revision_hash` (a gang surge replacement of `gang_surge_of`)."""
    config = state.config
    component = state.specs.get(revision_hash, config.component_spec)
    identity = InstanceIdentity(
        namespace=config.namespace,
        isvc=config.isvc,
        component=config.component,
        index=index,
        revision=revision_hash,
        revision_name=view.names(state).get(revision_hash, config.revision_name),
        isvc_uid=config.isvc_uid,
        pairing_protocol=config.pairing_protocol,
        gang_surge_of=gang_surge_of,
        parent_workflow_id=workflow.info().workflow_id,
        pause_mode=config.effective_pause_mode,
    )
    spec = instance_spec(identity, ComponentSpec.model_validate(component), config.cluster, view.policy(config))
    if runs_pod_net():
        spec = spec.model_copy(update={"relisted_by_parent": True})
    return kept_off(spec, avoided(state.relocations, index))


def kept_off(spec: InstanceSpec, nodes: Sequence[str]) -> InstanceSpec:
    """`spec` with its pods kept off `nodes`: an Instance relocated off the nodes it got stuck on."""
    if not nodes:
        return spec
    leader, worker = spec.leader_pod_spec, spec.worker_pod_spec
    for node in nodes:
        leader = placed_away(leader, node)
        worker = placed_away(worker, node) if worker is not None else None
    return spec.model_copy(update={"leader_pod_spec": leader, "worker_pod_spec": worker})


@dataclass
class StartListing:
    """The component's pods, listed once right before a pass's starts go out
    (`workflows.replica.instances.pods_at`): a new Instance whose index had none
    creates its pods without listing for leftovers itself (`InstanceState.started_clean`).

    `starting` is filled as the pass plans its starts; `with_pods` once the list answered."""

    starting: list[int] = field(default_factory=list)
    with_pods: frozenset[int] | None = None
    """Indexes with pods in that list; None when not listed (each new Instance looks itself)."""

    def clean(self, index: int) -> bool:
        return self.with_pods is not None and index not in self.with_pods


def first_input(spec: InstanceSpec, clean: bool = False) -> InstanceState:
    """A new Instance's input: its spec and the workflow version it starts under
    (`workflows.instance.versions`: it takes that version's changes without history markers);
    `clean`: its parent found no pod at its index just before the start. The caller records it
    in `ReplicaState.launched` first."""
    return InstanceState(
        spec=spec,
        pause_mode=spec.pause_mode,
        workflow_version=INSTANCE_WORKFLOW_VERSION,
        started_clean=clean,
        # The launch record stands for a single-pod Instance's first report (`replica_facts`
        # counts it as one pod); a gang's report says how many pods it holds.
        launched_by_parent=spec.pod_count == 1,
    )


async def start_instance(
    state: ReplicaState,
    run: RunChildren,
    index: int,
    revision_hash: str,
    gang_surge_of: int | None = None,
    spec: InstanceSpec | None = None,
    listing: StartListing | None = None,
) -> None:
    """Start Instance `index` as an abandoned child (it outlives this run; deletion is a signal);
    `spec` replaces the one `spec_for` gives (a migration's replacement, placed off a node);
    `listing` tells whether its index was found clean (read when the start goes out)."""
    config = state.config
    workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index, config.home)
    # Recorded before the start, so a pass while it is in flight counts it already.
    state.launched[index] = revision_hash
    run.started += 1
    first = first_input(
        spec if spec is not None else spec_for(state, index, revision_hash, gang_surge_of),
        clean=listing is not None and listing.clean(index),
    )
    try:
        await workflow.start_child_workflow(
            INSTANCE,
            first,
            id=workflow_id,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            static_summary=f"Instance {index} of {config.ir_name} ({view.names(state).get(revision_hash)})",
            search_attributes=search_attributes.at_start(
                search_attributes.instance_attributes(config.isvc, config.component, first.phase.value)
            ),
        )
    except WorkflowAlreadyStartedError:
        if index in run.ended:
            # The Instance that had this index reported its end but its workflow has not
            # closed yet: nothing was started, so the next pass starts it again.
            state.launched.pop(index, None)
            state.gang_surges.pop(index, None)
            run.start_again = True
            return
        # Started by an earlier run of this workflow: it reports to us by workflow ID.
    run.ended.discard(index)
