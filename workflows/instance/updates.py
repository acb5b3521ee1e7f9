"""Moving a Ready Instance to a new revision (spec reference §7, §9), the way `planning.instance.steps`
chose: images patched in place, a single-pod SurgeThenDrain, or drain-then-recreate; and the
restart, which recreates the pods the same way at the same revision.

A mixin of `InstanceWorkflow` (workflows/instance/workflow.py). Under a pause (§5) an in-flight
single-pod SurgeThenDrain holds before its old pod drains (`hold_surge_while_paused`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import InstanceFailure, InstancePhase
    from models.kube_ops import ObjectRef, PatchObjectInput
    from planning.instance import rules as policy
    from planning.instance.health import HOLD_PAIRING, HOLD_PAUSED, levels
    from planning.instance.pause import surge_may_drain
    from planning.instance.pods import in_place_image_patches, render_pods
    from planning.instance.rules import UpdateWay
    from workflows import kube_calls, metrics
    from workflows.instance import versions
    from workflows.instance.bring_up import BringUp, InstanceBringUp

P = InstancePhase


class InstanceUpdates(InstanceBringUp):
    def manifests(self, ordinal: int | None = None) -> list[dict[str, Any]]:
        """The pods of the target as rendered now, on the active ordinal unless told another."""
        state = self.state
        return render_pods(
            self.render_spec(), state.incarnation, state.active_ordinal if ordinal is None else ordinal
        )

    async def all_pods(self) -> dict[str, str]:
        """The members and every other pod of this Instance that exists now."""
        targets = dict(self.state.members)
        targets.update(await self.live_pods())
        return targets

    async def update_instance(self, way: UpdateWay) -> None:
        """Move to the target revision `way`; the retry block and phase are already set."""
        if way == UpdateWay.IN_PLACE:
            await self.update_in_place()
        elif way == UpdateWay.SURGE:
            await self.update_by_surge()
        else:
            await self.update_by_recreate()

    async def update_in_place(self) -> None:
        state, spec = self.state, self.spec
        self.begin("Update", "InPlace")
        for name, patch in in_place_image_patches(
            self.render_spec(), state.incarnation, state.active_ordinal
        ).items():
            await kube_calls.patch_object(
                PatchObjectInput(
                    ref=ObjectRef(api_version="v1", kind="Pod", name=name, namespace=spec.namespace),
                    patch=patch,
                    patch_type="strategic",
                    missing_ok=True,
                ),
                summary=f"patch images of {name} to revision {spec.revision[:4]}",
                local=self.local_kube,
            )
        await self.refresh_pods()
        result = await self.bring_up(self.manifests(), state.members)
        await self.finish_attempt(result, keep_pods=True)

    async def update_by_surge(self) -> None:
        """Single-pod SurgeThenDrain: the new pod on the other ordinal serves before the old drains."""
        state, spec = self.state, self.spec
        self.begin("Update", "Surge")
        ordinal = policy.next_ordinal(state.active_ordinal)
        manifests = self.manifests(ordinal)
        surge = await self.bring_up(manifests)
        if surge.outcome == "ok":
            held = await self.hold_surge_while_paused(manifests, surge)
            if held is None:
                # Deletion proceeds: the main loop drains and deletes every pod, the new one too.
                return
            surge = held
        if surge.outcome != "ok":
            # The old pod still serves: drop the surge pod and stay Ready on the old revision.
            await self.delete_pods(surge.members, "abandon surge")
            if isinstance(surge.outcome, InstanceFailure):
                await self.fail_attempt(surge.outcome, surge.members, keep_pods=False)
            state.operation = None
            self.set_phase(P.READY)
            return
        self.progress("SurgeDrain")
        old = dict(state.members)
        if self.local_kube:
            # The new pod serves: it is the Instance's while the old one drains, so a report
            # meanwhile counts it (runs recorded before counted only the draining pod).
            state.members = dict(surge.members)
        await self.teardown(old, spec.drain_seconds, "surge replaced the pod")
        state.active_ordinal = ordinal
        self.commit_ready(surge.members)

    async def hold_surge_while_paused(
        self, manifests: list[dict[str, Any]], surge: BringUp
    ) -> BringUp | None:
        """Paused (§5), or the drain held by a rollout run (`Pairing`, §6): stop before the old
        pod drains; both pods serve until resume or release.

        None when a delete came meanwhile. A surge pod that stopped serving during the pause is
        brought up again before the old pod may drain, so the Instance never serves nothing.
        """
        state = self.state
        while surge.outcome == "ok" and not surge_may_drain(state.pause_mode, state.drain_hold):
            self.progress("SurgeDrain", waiting=HOLD_PAUSED if state.pause_mode is not None else HOLD_PAIRING)
            await self.report(held_drain=state.drain_hold is not None)
            await workflow.wait_condition(
                lambda: surge_may_drain(state.pause_mode, state.drain_hold) or state.pending_delete is not None
            )
            if state.pending_delete is not None:
                return None
            if not levels(self.observed(), surge.members, self.spec.pod_count, 0.0, workflow.now()).serving:
                # Pods gone meanwhile are created again on their names, the rest waited for.
                fresh = await self.refresh_pods()
                present = {pod.name: pod.uid for pod in fresh.pods if not pod.terminating}
                members = {
                    name: uid if present.get(name) == uid else "" for name, uid in surge.members.items()
                }
                surge = await self.bring_up(manifests, members)
        return surge

    async def update_by_recreate(self) -> None:
        """RecreatePod (or a multi-pod update on its own names): drain first, then recreate."""
        self.begin("Update", "Drain")
        result = await self.recreate_pods(f"update to revision {self.spec.revision[:8]}")
        await self.finish_attempt(result, keep_pods=False)

    async def restart_instance(self, reason: str, failed_at: datetime | None = None) -> None:
        """Recreate every pod with a new incarnation; a failed restart stays Failed.
        `failed_at`: when the pod failure that asked for it happened (None: asked by a person)."""
        self.set_phase(P.RESTARTING)
        self.begin("Restart", "Drain")
        result = await self.recreate_pods(f"restart: {reason}", failed_at)
        failure = result.outcome if isinstance(result.outcome, InstanceFailure) else None
        await self.finish_attempt(result, keep_pods=failure is None or not failure.counting)

    async def recreate_pods(self, why: str, failed_at: datetime | None = None) -> BringUp:
        """Drain and delete every pod of the Instance, then bring it up with a new incarnation."""
        state = self.state
        await self.teardown(await self.all_pods(), state.spec.drain_seconds, why)
        if failed_at is not None:
            spec = state.spec
            metrics.pod_recreated(spec.namespace, spec.isvc, spec.component, workflow.now() - failed_at)
        state.incarnation += 1
        state.members = {}
        self.progress("CreatePods")
        return await self.bring_up(self.manifests())

    def serving_when_interrupted(self, members: dict[str, str]) -> bool:
        """Whether the pods of an attempt a newer revision interrupted serve already: ready,
        their gate True (created with it, ready before the workflow heard so). The Instance is
        then Ready at the attempt's revision, and the newer one goes next, by its way (a surge
        keeps it serving), instead of rebuilding them on their names (`versions.READY_BEFORE_UPDATE`).
        Not when a delete interrupted."""
        if self.state.pending_delete is not None or not members or not all(members.values()):
            return False
        counts = levels(self.observed(), members, self.spec.pod_count, 0.0, workflow.now())
        return counts.serving and self.takes(versions.READY_BEFORE_UPDATE)

    async def finish_attempt(self, result: BringUp, keep_pods: bool) -> None:
        """Ready on success, or when interrupted with its pods serving; otherwise Failed with the
        attempt's pods (kept or deleted)."""
        state = self.state
        if result.outcome == "ok" or (
            result.outcome == "interrupted" and self.serving_when_interrupted(result.members)
        ):
            self.commit_ready(result.members)
            return
        state.members = result.members
        if isinstance(result.outcome, InstanceFailure):
            state.members = await self.fail_attempt(result.outcome, result.members, keep_pods=keep_pods)
        self.set_phase(P.FAILED)
