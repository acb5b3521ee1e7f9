"""Rollout groups end to end on kubesim (spec: the rollout groups page, seed 004): the
InferenceService opens a `Rollout` run when a change moves grouped components, the run
paces each InferenceReplica, and status, Events and the rollout queries show it.

The dev server runs in real time here, with kubesim; the 10-minute soak of the seed is
shown on the time-skipping server in `test_rollout.py`, a 3-second one here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from kubesim.handle import KubeSim
from tests.workflows.rollout_examples import BLUE_GREEN, NAME, NAMESPACE, pd_manifest, pd_runtime
from tests.workflows.service_harness import IMAGE_1, IMAGE_2, Story, eventually, story
from workflows.names import rollout_workflow_id
from workflows.replica.workflow import InferenceReplicaWorkflow
from workflows.rollout.messages import RolloutView
from workflows.service.messages import ExplainView, RolloutStatusView
from workflows.service.workflow import InferenceServiceWorkflow

pytestmark = pytest.mark.workflows

IMAGE_3 = "docker.io/lmsysorg/sglang:v0.4.8"
BAD_IMAGE = "docker.io/lmsysorg/sglang:does-not-exist"
FAST = {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 1, "update_retry": None}


def manifest(
    s: Story, rollout: dict[str, Any], image: str | None = None, replicas: tuple[int, int] = (1, 1)
) -> dict[str, Any]:
    return pd_manifest(s.namespace, rollout, image, replicas)


def serving_images(s: Story, component: str) -> list[str]:
    return sorted(
        p.spec.containers[0].image for p in s.serving_pods() if p.metadata.labels["ome.io/component"] == component
    )


async def settled(s: Story, counts: dict[str, int], image: str) -> bool:
    """Every component serves `counts` Instances, the engine and the decoder on `image`."""
    view = await s.status()
    ready = view.status.condition("Ready")
    if ready is None or ready.status != "True":
        return False
    return all(
        serving_images(s, c) == [image] * n for c, n in counts.items() if c != "router"
    ) and len(serving_images(s, "router")) == counts.get("router", 1)


async def rollout_status(s: Story) -> RolloutStatusView:
    return await s.handle().query(InferenceServiceWorkflow.rollout_status)


async def explain(s: Story, component: str) -> ExplainView:
    return await s.handle().query(InferenceServiceWorkflow.explain, component)


async def run_outcome(s: Story, run: int) -> str | None:
    handle = s.client.get_workflow_handle(rollout_workflow_id(s.namespace, NAME, run), result_type=RolloutView)
    try:
        description = await handle.describe()
    except Exception:  # noqa: BLE001 - not started yet
        return None
    if description.status != WorkflowExecutionStatus.COMPLETED:
        return None
    result = await handle.result()
    return result.outcome


class Sampler:
    """Samples something every 50 ms while a change rolls out."""

    def __init__(self, probe: Callable[[], Any]) -> None:
        self.probe, self.samples, self.task = probe, [], None  # type: ignore[var-annotated]

    async def run(self) -> None:
        while True:
            value = self.probe()
            if asyncio.iscoroutine(value):
                value = await value
            self.samples.append((time.monotonic(), value))
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> Sampler:
        self.task = asyncio.create_task(self.run())  # type: ignore[assignment]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.task is not None
        if self.task.done():
            self.task.result()  # a sampler that died says why
        self.task.cancel()


def mistral(client: Client, task_queue: str, sim: KubeSim, cluster: dict[str, Any] | None = None) -> Any:
    """Each test in a namespace of its own: run IDs derive from it, and the dev server keeps
    the runs of earlier tests."""
    namespace = f"{NAMESPACE}-{uuid4().hex[:6]}"
    return story(client, task_queue, sim, cluster=cluster or FAST, name=NAME, namespace=namespace, runtime=pd_runtime())


async def test_engine_and_decoder_roll_out_together_by_blue_green_and_the_router_alone(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, BLUE_GREEN))
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_1), "mistral-pd serving", within=60)
        first = await rollout_status(s)
        assert first.run is None and first.rows == [], "the very first revision never runs a rollout"
        router_before = (await s.irep("router").query(InferenceReplicaWorkflow.status)).current_revision

        changed = await s.apply(manifest(s, BLUE_GREEN, IMAGE_2))
        assert changed.generation == 2
        await eventually(lambda: run_outcome(s, 2), "rollout run 2 to complete", within=90)
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_2), "both on the new image")

        shown = await rollout_status(s)
        assert shown.run == 2 and shown.outcome == "Completed" and not shown.active
        assert [(r.component, r.strategy) for r in shown.rows] == [("engine", "BlueGreen"), ("decoder", "BlueGreen")]
        assert (await s.irep("router").query(InferenceReplicaWorkflow.status)).current_revision == router_before
        isvc = await eventually(lambda: _rollout_closed(s), "status.rollout to show the closed run")
        assert isvc["status"]["rollout"]["groups"][0]["observedDigest"] == "rp1:cca45ec1fb0f"
        conditions = {c["type"]: c for c in isvc["status"]["conditions"]}
        assert conditions["RolloutPlanReady"]["reason"] == "NoActiveRun"
        why = await explain(s, "router")
        assert not why.grouped and "in no rollout group" in why.summary


def _rollout_closed(s: Story) -> dict[str, Any] | None:
    isvc = s.object("inferenceservices", NAME) or {}
    rollout = (isvc.get("status") or {}).get("rollout") or {}
    groups = rollout.get("groups") or []
    return isvc if groups and "activeRun" not in rollout and groups[0].get("phase") == "Succeeded" else None


async def test_a_sequence_rolls_the_decoder_then_the_engine_after_the_soak(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    sequence = {"groups": [{"components": ["decoder"], "soak": "3s"}, {"components": ["engine"]}]}
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, sequence))
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_1), "mistral-pd serving", within=60)

        async def sample() -> tuple[Any, list[str], list[str]]:
            hold = (await s.irep("engine").query(InferenceReplicaWorkflow.status)).rollout_hold
            return (
                (hold.gate, hold.reason) if hold is not None else None,
                serving_images(s, "decoder"),
                [p.spec.containers[0].image for p in s.pods() if p.metadata.labels["ome.io/component"] == "engine"],
            )

        async with Sampler(sample) as sampler:
            await s.apply(manifest(s, sequence, IMAGE_2))
            await eventually(lambda: run_outcome(s, 2), "rollout run 2 to complete", within=90)
        holds = [value[0] for _, value in sampler.samples if value[0] is not None]
        assert ("Sequential", "Sequential waiting on decoder") in holds, holds
        assert ("Sequential", "Sequential.Soak: engine waiting out the 3s soak after decoder") in holds, holds
        decoder_done = next(t for t, value in sampler.samples if value[1] == [IMAGE_2])
        engine_started = next(t for t, value in sampler.samples if IMAGE_2 in value[2])
        assert engine_started >= decoder_done + 2.9, "the engine starts no earlier than the decoder's finish + soak"


async def test_a_failed_instance_fails_the_group_and_the_other_component_goes_on(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, BLUE_GREEN))
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_1), "mistral-pd serving", within=60)
        broken = manifest(s, BLUE_GREEN, IMAGE_2)
        broken["spec"]["engine"]["runner"] = {"image": BAD_IMAGE}
        await s.apply(broken)
        events = await eventually(lambda: _events(s, "CoordinationGroupFailed"), "CoordinationGroupFailed", within=60)
        assert events[0]["type"] == "Warning"
        assert "group 0 (engine, decoder) failed: a failed Instance in engine" in events[0]["message"]
        await eventually(lambda: serving_images(s, "decoder") == [IMAGE_2], "the decoder to go on to the new image")
        # The run learns the decoder finished from the decoder's InferenceReplica a moment after its pod serves.
        status = await eventually(
            lambda: _reported_failed(s), "the rollout status to report the failed run", within=30
        )
        assert status.reported == "Failed"


async def _reported_failed(s: Story) -> RolloutStatusView | None:
    status = await rollout_status(s)
    return status if status.reported != "InProgress" else None


def _events(s: Story, reason: str) -> list[dict[str, Any]] | None:
    listed = s.core.list_namespaced_event(s.namespace).items
    found = [{"type": e.type, "message": e.message} for e in listed if e.reason == reason]
    return found or None


async def test_a_newer_image_during_a_run_supersedes_it(dev_client: Client, task_queue: str, kubesim: KubeSim) -> None:
    kubesim.set_image_behavior(IMAGE_2, ready_seconds=2.0)
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, BLUE_GREEN))
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_1), "mistral-pd serving", within=60)
        await s.apply(manifest(s, BLUE_GREEN, IMAGE_2))
        await eventually(lambda: _started(s, 2), "rollout run 2 to open")
        await s.apply(manifest(s, BLUE_GREEN, IMAGE_3))
        assert await eventually(lambda: run_outcome(s, 2), "run 2 to close", within=60) == "Superseded"
        assert await eventually(lambda: run_outcome(s, 3), "run 3 to complete", within=90) == "Completed"
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_3), "both on the newest image")


async def _started(s: Story, run: int) -> bool:
    try:
        await s.client.get_workflow_handle(rollout_workflow_id(s.namespace, NAME, run)).describe()
    except Exception:  # noqa: BLE001 - not yet
        return False
    return True


async def test_a_pause_during_a_run_holds_its_groups_paused_until_resume(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(IMAGE_2, ready_seconds=1.5)
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, BLUE_GREEN, replicas=(2, 2)))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=60)
        await s.apply(manifest(s, BLUE_GREEN, IMAGE_2, replicas=(2, 2)))
        await eventually(lambda: _started(s, 2), "rollout run 2 to open")
        await s.handle().signal("pause")
        paused = await eventually(lambda: _reported(s, "Paused"), "the run to show Paused", within=30)
        assert paused.active and {r.group_phase for r in paused.rows} == {"Paused"}
        # The InferenceReplica objects say the same: their run, their group and its phase.
        refs = await eventually(lambda: _group_refs(s, "Paused"), "the InferenceReplicas to show Paused")
        assert refs == {c: {"rollout": rollout_workflow_id(s.namespace, NAME, 2), "run": 2, "group": 0,
                            "phase": "Paused"} for c in ("engine", "decoder")}
        assert "coordinationGroupRef" not in s.object("inferencereplicas", f"{NAME}-router")["status"]
        await s.handle().signal("resume")
        await eventually(lambda: run_outcome(s, 2), "rollout run 2 to complete after resume", within=90)
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_2), "all on the new image")
        await eventually(lambda: _run_gone_from_replicas(s), "the closed run's refs and holds to go from the InferenceReplicas")


def _group_refs(s: Story, phase: str) -> dict[str, Any] | None:
    refs = {c: (s.object("inferencereplicas", f"{NAME}-{c}") or {}).get("status", {}).get("coordinationGroupRef")
            for c in ("engine", "decoder")}
    return refs if all(r is not None and r["phase"] == phase for r in refs.values()) else None


def _run_gone_from_replicas(s: Story) -> bool:
    """A merge patch keeps what it does not name: the cleared fields must really be gone."""
    statuses = [(s.object("inferencereplicas", f"{NAME}-{c}") or {}).get("status", {}) for c in ("engine", "decoder")]
    return all("coordinationGroupRef" not in st and "rolloutHold" not in st for st in statuses)


async def _reported(s: Story, state: str) -> RolloutStatusView | None:
    shown = await rollout_status(s)
    return shown if shown.reported == state else None


def same_token_pair(s: Story) -> bool:
    """Some engine and some decoder of the same `ome.io/pairing-protocol` token both serve."""
    tokens: dict[str, set[str]] = {"engine": set(), "decoder": set()}
    for pod in s.serving_pods():
        component = pod.metadata.labels["ome.io/component"]
        if component in tokens:
            tokens[component].add(pod.metadata.labels.get("ome.io/pairing-protocol", ""))
    return bool(tokens["engine"] & tokens["decoder"])


async def test_a_pairing_protocol_change_keeps_a_same_token_pair_serving(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """kv-v1 -> kv-v2 with one engine and one decoder under SurgeThenDrain: each old pod's
    drain waits (gate Pairing) until the other component's kv-v2 pod serves."""
    kubesim.set_image_behavior(IMAGE_1, ready_seconds=0.5)
    kv1 = {"pairingProtocol": "kv-v1", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}
    kv2 = {"pairingProtocol": "kv-v2", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, kv1))
        await eventually(lambda: settled(s, {"engine": 1, "decoder": 1}, IMAGE_1), "mistral-pd serving", within=60)
        # The decoder's kv-v2 pod is slow to become ready, so the engine's waits to drain.
        kubesim.set_image_behavior(IMAGE_1, ready_seconds=3.0)

        async def sample() -> tuple[bool, Any]:
            hold = (await s.irep("engine").query(InferenceReplicaWorkflow.status)).rollout_hold
            return same_token_pair(s), (hold.gate, hold.reason) if hold is not None else None

        async with Sampler(sample) as sampler:
            await s.apply(manifest(s, kv2))
            assert await eventually(lambda: run_outcome(s, 2), "the protocol run to complete", within=90) == "Completed"
        unpaired = [t for t, (paired, _) in sampler.samples if not paired]
        assert not unpaired, f"no same-token pair served in {len(unpaired)} of {len(sampler.samples)} samples"
        gates = {value[1][0] for _, value in sampler.samples if value[1] is not None}
        assert "Pairing" in gates, gates
        paired = [p for p in s.serving_pods() if p.metadata.labels["ome.io/component"] in ("engine", "decoder")]
        tokens = {p.metadata.labels.get("ome.io/pairing-protocol") for p in paired}
        assert tokens == {"kv-v2"} and len(paired) == 2, tokens


def _conditions(s: Story) -> dict[str, dict[str, Any]]:
    isvc = s.object("inferenceservices", NAME) or {}
    return {c["type"]: c for c in (isvc.get("status") or {}).get("conditions") or []}


async def test_an_edit_to_spec_rollout_during_a_run_applies_to_the_next_one(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    rolling = {"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}]}
    kubesim.set_image_behavior(IMAGE_2, ready_seconds=2.0)
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, BLUE_GREEN, replicas=(2, 2)))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=60)
        await s.apply(manifest(s, BLUE_GREEN, IMAGE_2, replicas=(2, 2)))
        await eventually(lambda: _started(s, 2), "rollout run 2 to open")
        # Only spec.rollout changes: no component gets a new revision, so no run opens.
        edited = await s.apply(manifest(s, rolling, IMAGE_2, replicas=(2, 2)))
        assert edited.changed and edited.generation == 3
        drift = await eventually(
            lambda: (_conditions(s).get("RolloutPlanDrift") or {}).get("reason") == "SpecNewerThanRun" and _conditions(s),
            "RolloutPlanDrift SpecNewerThanRun while run 2 goes on",
        )
        assert drift["RolloutPlanReady"]["reason"] == "Pinned"
        assert await eventually(lambda: run_outcome(s, 2), "run 2 to complete on its pinned plan", within=90) == "Completed"
        assert not await _started(s, 3), "an edit to spec.rollout alone opens no run"
        shown = await rollout_status(s)
        assert {row.strategy for row in shown.rows} == {"BlueGreen"}, "run 2 kept the plan it pinned"
        await eventually(lambda: (_conditions(s).get("RolloutPlanDrift") or {}).get("reason") == "InSync", "drift cleared")
        # The next change runs the edited plan.
        await s.apply(manifest(s, rolling, IMAGE_3, replicas=(2, 2)))
        assert await eventually(lambda: run_outcome(s, 4), "run 4 to complete", within=90) == "Completed"
        assert {row.strategy for row in (await rollout_status(s)).rows} == {"RollingUpdate"}


async def test_four_engines_and_two_decoders_keep_their_ratio_band_by_rolling_update(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """Seed 004's 4+2 group with maxSurge 1, maxUnavailable 0, tolerance 25: the serving
    ratio sampled throughout stays within 2:1 x (1 +- 25%) but for the reference's escapes
    (one surge on a balanced pool, one drain within twice the band)."""
    group = {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                "maintainRatio": {"tolerance": 25},
            }
        ]
    }
    # The new engines are slow to become ready and the new decoders quick, so the decoder
    # would run ahead: the ratio gate must hold it.
    kubesim.set_image_behavior(IMAGE_2, ready_seconds=1.5)
    kubesim.set_image_behavior(IMAGE_3, ready_seconds=0.2)
    async with mistral(dev_client, task_queue, kubesim) as s:
        await s.apply(manifest(s, group, replicas=(4, 2)))
        await eventually(lambda: settled(s, {"engine": 4, "decoder": 2}, IMAGE_1), "4 engines and 2 decoders", within=90)
        changed = manifest(s, group, IMAGE_2, replicas=(4, 2))
        changed["spec"]["decoder"]["runner"]["image"] = IMAGE_3

        def serving() -> tuple[int, int]:
            counts = {"engine": 0, "decoder": 0}
            for pod in s.serving_pods():
                component = pod.metadata.labels["ome.io/component"]
                if component in counts:
                    counts[component] += 1
            for component in counts:
                hold = ((s.object("inferencereplicas", f"{NAME}-{component}") or {}).get("status") or {}).get("rolloutHold")
                if hold is not None:
                    gates.add((component, hold["gate"]))
            return counts["engine"], counts["decoder"]

        gates: set[tuple[str, str]] = set()
        async with Sampler(serving) as sampler:
            await s.apply(changed)
            assert await eventually(lambda: run_outcome(s, 2), "the run to complete", within=120) == "Completed"
        await eventually(lambda: settled(s, {"engine": 4}, IMAGE_2), "the engines on the new image")
        assert serving_images(s, "decoder") == [IMAGE_3] * 2
        samples = [value for _, value in sampler.samples]
        assert len(samples) > 20 and any(sample != (4, 2) for sample in samples), "the sampler saw the surges"
        outside = [(e, d) for e, d in samples if d and abs(e / d / 2.0 - 1) > 0.25]
        # Escapes: a surge on the balanced 4:2 (4:3) and the drains back within twice the band.
        assert all(abs(e / d / 2.0 - 1) <= 0.5 for e, d in outside), outside
        assert all(e >= 4 and d >= 2 for e, d in samples), "maxUnavailable 0: never fewer serving than desired"
        # With maxSurge 1 the counts alone cannot leave twice the band; that the ratio is kept
        # shows in its gate: the quick decoder, one move from 100%, waits for the slow engines.
        assert ("decoder", "Ratio") in gates, f"the ratio never held the decoder: {sorted(gates)}"
