"""The InferenceReplica workflow's view of its state: what its rules and projections read.

Plain functions of `ReplicaState` / `ReplicaConfig`, no Temporal calls: the update policy,
the desired count, the revision names, the revision Instances move to now (the update
revision, or the stable one a rollback returns to: `planning.replica.rollback`), the facts
(`planning.replica.overlay.replica_facts`) and the retry blocks in force
(`planning.replica.overlay.replica_retry_blocks`).

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from models.inferenceservice import ComponentSpec
from models.instance import InstanceStatus, RetryBlock
from planning.replica.budget import UpdatePolicy, update_policy
from planning.replica.facts import InstanceFacts
from planning.replica.migration_views import with_migrations
from planning.replica.overlay import as_counted, as_deleting, replica_facts, replica_retry_blocks
from planning.replica.revisions import RevisionState, rolling_back_to
from planning.replica.rollback import Steering, rollback_target, steer
from planning.replica.scale import desired_replicas
from workflows.replica.messages import ReplicaConfig, ReplicaState


def policy(config: ReplicaConfig) -> UpdatePolicy:
    """The component's update policy: its lifecycle over the cluster's defaults; a rolling-update
    rollout group's `maxSurge` / `maxUnavailable` replace its own budgets while its run moves it."""
    own = update_policy(config.effective.lifecycle, config.cluster.update_policy)
    group = config.coordination
    if rollback_target(config.revision_hash, group) is not None:
        # A rollback returns every Instance: no partition holds one on the canary revision.
        own = replace(own, partition=0)
    if group is None or (group.max_surge is None and group.max_unavailable is None):
        return own
    return replace(own, max_surge=group.max_surge, max_unavailable=group.max_unavailable)


def desired(config: ReplicaConfig) -> int:
    """How many Instances the component wants: min/max replicas, or the transient scale."""
    effective = config.effective
    return desired_replicas(effective.min_replicas, effective.max_replicas, None, config.transient_replicas).desired


def names(state: ReplicaState) -> dict[str, str]:
    """Revision hash -> ControllerRevision-style name, for status and events."""
    return {record.hash: record.name for record in state.revisions.history}


def steering(state: ReplicaState, config: ReplicaConfig | None = None) -> Steering:
    """Which revision Instances move to now under `config` (the state's by default), and
    under which cap (`planning.replica.rollback`)."""
    config = config or state.config
    return steer(config.revision_hash, config.coordination, state.specs)


def target_hash(state: ReplicaState) -> str:
    """The revision hash Instances move to now: the update revision, or a rollback's."""
    return steering(state).revision


def target_spec(state: ReplicaState, config: ReplicaConfig | None = None) -> ComponentSpec:
    """The effective component of the revision Instances move to now under `config`."""
    config = config or state.config
    revision = steering(state, config).revision
    if revision == config.revision_hash:
        return config.effective
    return ComponentSpec.model_validate(state.specs[revision])


def shown_revisions(state: ReplicaState) -> RevisionState:
    """The revisions as status shows them: while rolling back, the update revision is the stable one."""
    moving = steering(state)
    if not moving.rolling_back:
        return state.revisions
    return rolling_back_to(state.revisions, names(state).get(moving.revision))


def named(block: RetryBlock, names: dict[str, str]) -> RetryBlock:
    """`block` with its revision shown by name, as status rows and Events show it."""
    return block.model_copy(update={"target_revision": names.get(block.target_revision, block.target_revision)})


def reports(state: ReplicaState) -> dict[int, InstanceStatus]:
    """Each Instance's last report, by index; one told to update and still Ready on another
    revision shown as its report of the update's start would show it (`Updating` to the
    requested revision), since it sends none when counted from the request
    (`ReplicaState.shows_requested`); likewise one told to delete, as `Deleting` out of
    rotation (`ReplicaState.requested_deletes`). What the status rows, the safety re-list and
    the relocations read."""
    rows = state.instances
    if state.shows_requested:
        rows = {index: as_counted(status, state.requested_updates.get(index)) for index, status in rows.items()}
    asked = state.requested_deletes
    if asked:
        rows = {
            index: as_deleting(status, asked[index].since, asked[index].deadline) if index in asked else status
            for index, status in rows.items()
        }
    return rows


def drain_deadlines(state: ReplicaState) -> dict[int, datetime]:
    """Each deleting Instance's drain deadline, by index: its Delete operation's, as it reported
    it, or the one counted from the request it has not reported on (`requested_deletes`)."""
    present = set(state.instances) | set(state.launched)
    deadlines = {
        index: record.deadline
        for index, record in state.requested_deletes.items()
        if record.deadline is not None and index in present
    }
    for index, status in state.instances.items():
        operation = status.operation
        if operation is not None and operation.type == "Delete" and operation.deadline:
            deadlines[index] = operation.deadline
    return deadlines


def facts(state: ReplicaState) -> list[InstanceFacts]:
    """What the rules read: reports, overlaid with what we asked for and have not heard back,
    and with the migrations moving Instances (`planning.replica.migrations.with_migrations`)."""
    return with_migrations(raw_facts(state), state.migrations)


def raw_facts(state: ReplicaState) -> list[InstanceFacts]:
    """The facts without the migrations' overlay: what the migration decisions read."""
    return replica_facts(
        state.instances,
        state.launched,
        state.requested_updates,
        state.removing,
        state.gang_surges,
        policy(state.config),
        state.shows_requested,
        state.requested_deletes.keys(),
        state.counts_launched_removals,
        facts_of=state.memo.facts,
    )


def retry_blocks(state: ReplicaState) -> list[RetryBlock]:
    """The Instances' blocks and those kept from surge replacements that gave up."""
    return replica_retry_blocks(state.instances.values(), state.gang_blocks, target_hash(state))
