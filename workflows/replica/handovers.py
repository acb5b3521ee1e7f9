"""Multi-pod SurgeThenDrain handovers (`planning.replica.handover`) as the workflow keeps them.

Which replacement was started for which Instance is known only to this workflow
(`state.gang_surges`); the facts and status rows are overlaid with it
(`workflows.replica.view`, `workflows.replica.projection`). A replacement that gave up
deletes itself and leaves its retry block with this workflow (`state.gang_blocks`).

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from datetime import datetime

from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
from models.instance import InstanceStatus, UpdateRequest
from planning.replica.handover import GANG_SURGE_COMPLETED, settle_surges
from planning.replica.overlay import ready_revisions
from planning.replica.retry import absorb_abandoned_surge, current_blocks
from workflows.replica import view
from workflows.replica.children import signal_instance, spec_for
from workflows.replica.deletions import tell_to_delete
from workflows.replica.messages import ReplicaState


def note_surge_report(state: ReplicaState, status: InstanceStatus, now: datetime) -> None:
    """Fold a replacement's report into its handover record, before the report itself.

    A surge replacement that gave up deletes itself and its retry block with it: the block
    stays here, so the next replacement is the next attempt, not a first one. Its record
    stays until its last report says its pods are gone (`GangSurgeTargetCleanup`).
    """
    surge = state.gang_surges.get(status.index)
    if surge is None:
        return
    if status.abandoned and not surge.abandoned:
        kept = next((b for b in state.gang_blocks if b.target_revision == surge.revision), None)
        failure = status.last_failure
        block = absorb_abandoned_surge(
            kept,
            status.retry_block,
            surge.revision,
            failure.reason if failure is not None else None,
            now,
            state.config.cluster.update_retry,
        )
        others = [b for b in state.gang_blocks if b.target_revision != surge.revision]
        state.gang_blocks = others + ([block] if block is not None else [])
        state.gang_surges[status.index] = replace(surge, abandoned=True)
    if status.deleted:
        del state.gang_surges[status.index]


def settle_handovers(state: ReplicaState) -> None:
    """Forget handovers that ended, and kept blocks that no longer matter."""
    state.gang_surges = settle_surges(state.gang_surges, set(state.instances) | set(state.launched))
    ready = ready_revisions(state.instances.values())
    state.gang_blocks = current_blocks(state.gang_blocks, view.target_hash(state), ready)


def surging_for(state: ReplicaState, index: int) -> int | None:
    """The source Instance `index` is still a gang surge target for; None once it took over."""
    surge = state.gang_surges.get(index)
    if surge is None or surge.source in state.removing:
        return None
    return surge.source


def finish_handovers(state: ReplicaState, sources: tuple[int, ...]) -> list[Awaitable[None]]:
    """Drain and delete each source whose replacement serves (`GangSurgeCompleted`)."""
    config = state.config
    sends: list[Awaitable[None]] = []
    for source in sources:
        sends += tell_to_delete(state, [source], GANG_SURGE_COMPLETED)
        # The replacement is a plain Instance from now on: a later failure of it is
        # retried like any other, not abandoned as a surge that never took over.
        for index, surge in state.gang_surges.items():
            if surge.source == source:
                plain = UpdateRequest(spec=spec_for(state, index, surge.revision))
                sends.append(signal_instance(config, index, INSTANCE_UPDATE, plain))
    return sends
