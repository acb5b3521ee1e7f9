"""The worker SIGKILLed at random moments during canaries with analysis (issue 12).

Seed 004's mistral-pd with 4 engines and 2 decoders in one canary group of three steps (25%,
50%, 100%), each gated by analysis against the Prometheus that scrapes kubesim's simulated
traffic, each with a minimum bake so that it takes several samples. A change of image opens a
`Rollout` run. Two changes run at once, each in its own namespace:

- a good image: the canary passes step by step to `Stable`, the run `Completed`, every engine
  and decoder Instance on the new image;
- a bad image (30% of its requests fail): the canary rolls back at its first step after
  exactly `failureLimit` failing samples, every Instance back on the stable image, the stable
  revision serving an engine and a decoder throughout. The run stays open (`RolledBack`, to
  be retried), so its end is the phase the InferenceService shows.

Each runs twice: on a worker process that is killed five times while both runs are under way,
and, as the reference, on a worker nobody kills (its own task queue and namespaces, the same
dev server, kubesim and Prometheus). The killed runs must end exactly as the undisturbed ones:
the same verdict, the same final revisions, the same recorded traffic.

The Rollout's history is the analysis record: each sample is one `prometheus.analysis_sample`
activity whose summary names its step and its number within the step (`step 1 sample 3`),
numbered from the verdicts applied at the step so far. Numbers that run 1, 2, 3, ... in each
step say that every verdict was applied exactly once (one lost would repeat a number, one
applied twice would skip one), and the failing verdicts in the history are exactly the
`analysisFailedChecks` the status shows: no sample counted twice toward `failureLimit`.

As in `test_chaos_rollout.py` (whose `RolloutSampler` this reuses), the workers are real
processes so a SIGKILL is a real crash, the watcher runs beside them and is never killed, and
kubesim is sampled on its own loop. A kill that lands during a Kubernetes call costs the killed
run that call's heartbeat timeout (`KUBE_HEARTBEAT`, 15 s) before it is retried elsewhere, and
one that lands on a workflow task that task's timeout, so the test takes one to three minutes
depending on where the kills land.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import kubernetes
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    PodSnapshot,
    ProductProcess,
    apply,
    observe_pods,
    topology_for,
    watcher_process,
    worker_process,
)
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.canary_analysis import PROMETHEUS_ANALYSIS_SAMPLE
from tests.e2e.test_chaos_rollout import RolloutSampler, prepare, until_settled
from tests.fixtures.prometheus import RunningPrometheus
from tests.workflows.rollout_examples import NAME, pd_manifest
from tests.workflows.test_service_canary import ERROR_RATE
from workers.config import ENV_PREFIX
from workflows.names import irep_workflow_id, isvc_workflow_id, rollout_workflow_id
from workflows.rollout.messages import QUERY_STATUS, RolloutView

pytestmark = pytest.mark.e2e

REPLICAS = (4, 2)
DESIRED = {"engine": 4, "decoder": 2}
BAD_IMAGE = "docker.io/lmsysorg/sglang:v0.4.7-bad"
FAILURE_LIMIT = 2
KILLS = 5
SEED = 12_2026
FIRST_KILL_AFTER = (0.5, 2.0)
KILL_AFTER_SECONDS = (0.3, 1.5)
DOWN_SECONDS = (0.0, 0.5)
SETTLE_WITHIN = 120.0
END_WITHIN = 240.0
"""The ends of the killed runs: several kills may each cost a heartbeat or workflow task timeout."""
ANALYSIS = {
    "interval": "2s",
    "initialDelay": "3s",
    "failureLimit": FAILURE_LIMIT,
    "onInconclusive": "Hold",
    "metrics": [ERROR_RATE],
}
BAKE = {"duration": "6s"}
"""The minimum bake: a step passes on a sample taken 6 s after its Instances were ready, so each
step takes about three samples (at 3 s, 5 s and 7 s)."""
CANARY = {
    "groups": [
        {
            "components": ["engine", "decoder"],
            "canary": {
                "steps": [
                    {"capacity": "25%", "traffic": 25, "analysis": ANALYSIS, "pause": BAKE},
                    {"capacity": "50%", "traffic": 50, "analysis": ANALYSIS, "pause": BAKE},
                    {"capacity": "100%", "traffic": 100, "analysis": ANALYSIS, "pause": BAKE},
                ],
                "readyTimeout": "5m",
            },
        }
    ]
}
SAMPLE_SUMMARY = re.compile(r"^step (\d+) sample (\d+):")
ROLES = ("chaos", "calm")


@dataclass(frozen=True)
class Variant:
    """A change and how an undisturbed run of it ends."""

    name: str
    image: str
    final_image: str
    phase: str
    """The canary's final `rolloutPhase`."""
    run_outcome: str | None
    """The Rollout's result (None: the run stays open, as a rolled-back canary's does)."""
    current_step: int
    failed_checks: int


GOOD = Variant("good", IMAGE_2, IMAGE_2, "Stable", "Completed", 3, 0)
BAD = Variant("bad", BAD_IMAGE, IMAGE_1, "RolledBack", None, 0, FAILURE_LIMIT)
VARIANTS = (GOOD, BAD)


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    sim = KubeSim(topology=topology_for(64), crds="product", timing=Timing.fast()).start()
    # Each new Instance takes a moment to become ready, so the steps span the kills.
    sim.set_default_timing(pull_seconds=0.0, start_seconds=0.0, ready_seconds=0.5, factor=1.0)
    sim.set_engine_behavior(BAD_IMAGE, error_ratio=0.3)
    # The bad image's Instances take longer to come up, so its failing samples (which end its
    # run within seconds) fall among the kills, not before them.
    sim.set_image_behavior(BAD_IMAGE, ready_seconds=3.0)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def prometheus(cluster: KubeSim, tmp_path: Path) -> Iterator[RunningPrometheus]:
    """Skips the test without `prometheus` (fails it under CI=true: `require_prometheus`)."""
    with RunningPrometheus(tmp_path, {"kubesim": f"127.0.0.1:{cluster.port}"}, interval_seconds=1) as running:
        yield running


def manifest(namespace: str, image: str) -> dict[str, Any]:
    return pd_manifest(namespace, copy.deepcopy(CANARY), image, REPLICAS)


class CanarySampler(RolloutSampler):
    """`RolloutSampler`'s watch (no stray pod, the fewest Instances serving and the most live
    pods of one Instance: a canary step replaces Instances by SurgeThenDrain, so never fewer
    serving than desired and at most one surge pod each; an engine and a decoder serving
    together) plus the fewest Instances of each component serving on the stable image."""

    def __init__(self, sim: KubeSim, namespace: str) -> None:
        super().__init__(sim, namespace, DESIRED)
        self.fewest_stable = dict(DESIRED)

    def observe(self, seen: PodSnapshot) -> None:
        super().observe(seen)
        for component in DESIRED:
            serving = len(seen.of(component).serving_indexes(IMAGE_1))
            self.fewest_stable[component] = min(self.fewest_stable[component], serving)

    def check_canary(self, variant: Variant) -> None:
        assert self.samples > 20, f"only {self.samples} samples: the sampler missed the run"
        assert self.fewest == DESIRED, f"fewer Instances served than desired at one moment: {self.fewest}"
        assert self.most_live <= 2, "an Instance had more than its pod and one surge pod"
        assert not self.unpaired, f"no engine and decoder served together in {len(self.unpaired)} samples"
        if variant is BAD:
            assert min(self.fewest_stable.values()) >= 1, (
                f"the stable revision stopped serving a component at one moment: {self.fewest_stable}"
            )


def isvc_status(sim: KubeSim, namespace: str) -> dict[str, Any]:
    api = sim.api_client()
    try:
        isvc = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            "ome.io", "v1beta1", namespace, "inferenceservices", NAME
        )
    finally:
        api.close()
    assert isinstance(isvc, dict)
    return dict(isvc.get("status") or {})


def canary_phase(sim: KubeSim, namespace: str) -> str | None:
    """The engine's (the canary group's primary) `rolloutPhase`, None before the run shows one."""
    engine = (isvc_status(sim, namespace).get("components") or {}).get("engine") or {}
    return engine.get("rolloutPhase")


@dataclass(frozen=True)
class Sample:
    """One `prometheus.analysis_sample` activity of the Rollout's history."""

    step: int
    number: int
    verdict: str | None
    """`Pass`, `Fail` or `Inconclusive` when it completed; None when it did not (timed out)."""
    attempts: int
    """More than 1: an attempt died with its worker and the sample was asked again."""


async def run_histories(client: Client, namespace: str) -> list[WorkflowHistory]:
    """Every run of the Rollout, oldest first (the dev server suggests continue-as-new every
    200 events, so a canary's run continues as new several times)."""
    workflow_id = rollout_workflow_id(namespace, NAME, 2)
    histories: list[WorkflowHistory] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.insert(0, history)
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id
        if not run_id:
            return histories


def samples_of(history: WorkflowHistory) -> list[Sample]:
    """The samples one run scheduled, in order, with the verdicts that completed."""
    scheduled: dict[int, tuple[int, int]] = {}
    verdicts: dict[int, str] = {}
    attempts: dict[int, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name != PROMETHEUS_ANALYSIS_SAMPLE:
                continue
            summary = json.loads(event.user_metadata.summary.data)
            found = SAMPLE_SUMMARY.match(summary)
            assert found is not None, f"a sample's summary names no step and number: {summary!r}"
            scheduled[event.event_id] = (int(found[1]), int(found[2]))
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            attempts[started.scheduled_event_id] = started.attempt
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id in scheduled:
                verdicts[completed.scheduled_event_id] = str(json.loads(completed.result.payloads[0].data)["verdict"])
    return [
        Sample(step, number, verdicts.get(at), attempts.get(at, 0)) for at, (step, number) in sorted(scheduled.items())
    ]


@dataclass(frozen=True)
class Outcome:
    """How one change ended; `verdict()` is what the killed and the undisturbed run share."""

    run_outcome: str | None
    reported: str
    phase: str
    current_step: int
    failed_checks: int
    canary_revisions: tuple[str | None, str | None, str | None]
    """The canary status's canary, stable (cleared once Stable) and rolled-back revision hashes."""
    revisions: dict[str, tuple[str, str]]
    """Component -> (currentRevision, updateRevision)."""
    traffic: tuple[tuple[str, int, str | None], ...]
    images: dict[str, set[str]]
    samples: tuple[Sample, ...]
    ended_at: float
    """`time.monotonic()` when the InferenceService first showed the canary's final phase."""

    def verdict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in ("samples", "ended_at")}


async def run_is_open(client: Client, namespace: str) -> bool:
    description = await client.get_workflow_handle(rollout_workflow_id(namespace, NAME, 2)).describe()
    return description.status == WorkflowExecutionStatus.RUNNING


async def where_it_waits(client: Client, namespace: str) -> str:
    """For a failure message: what each of the namespace's workflows waits on."""
    ids = [
        isvc_workflow_id(namespace, NAME),
        rollout_workflow_id(namespace, NAME, 2),
        *(irep_workflow_id(namespace, NAME, component) for component in DESIRED),
    ]
    lines = []
    for workflow_id in ids:
        try:
            description = await client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            lines.append(f"{workflow_id}: {error}")
            continue
        raw = description.raw_description
        pending = [
            f"{a.activity_type.name} attempt {a.attempt} {a.last_failure.message[:200]!r}" for a in raw.pending_activities
        ]
        children = [c.workflow_id for c in raw.pending_children]
        lines.append(
            f"{workflow_id}: {description.status.name if description.status else None}, "
            f"{description.history_length} events, pending activities {pending}, children {children}"
        )
    return "\n".join(lines)


async def outcome_of(client: Client, sim: KubeSim, namespace: str, variant: Variant) -> Outcome:
    """Wait for the canary's end and the Instances to settle on the variant's final image."""
    deadline = time.monotonic() + END_WITHIN
    while (phase := await asyncio.to_thread(canary_phase, sim, namespace)) != variant.phase:
        assert phase not in ("Stable", "RolledBack", "Failed"), f"{namespace}: the canary ended {phase}"
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{namespace}: no {variant.phase} within {END_WITHIN:.0f} s ({phase})\n"
                + await where_it_waits(client, namespace)
            )
        await asyncio.sleep(0.5)
    ended_at = time.monotonic()
    run = client.get_workflow_handle(rollout_workflow_id(namespace, NAME, 2), result_type=RolloutView)
    if variant.run_outcome is not None:
        result = await asyncio.wait_for(run.result(), 60)
        run_outcome, reported = result.outcome, result.reported
    else:
        assert await run_is_open(client, namespace), f"{namespace}: the rolled-back run closed"
        shown = await run.query(QUERY_STATUS, result_type=RolloutView)
        run_outcome, reported = shown.outcome, shown.reported
    final = {"engine": variant.final_image, "decoder": variant.final_image}
    await until_settled(sim, namespace, final, SETTLE_WITHIN)
    seen = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
    components = (await asyncio.to_thread(isvc_status, sim, namespace)).get("components") or {}
    engine = components.get("engine") or {}
    canary = engine.get("canary") or {}
    lifecycles = {c: (components.get(c) or {}).get("lifecycle") or {} for c in DESIRED}
    histories = await run_histories(client, namespace)
    return Outcome(
        run_outcome=run_outcome,
        reported=reported,
        phase=str(engine.get("rolloutPhase")),
        current_step=int(canary.get("currentStep") or 0),
        failed_checks=int(canary.get("analysisFailedChecks") or 0),
        canary_revisions=(
            canary.get("canaryRevisionHash"), canary.get("stableRevisionHash"), canary.get("rolledBackRevisionHash")
        ),
        revisions={c: (str(s.get("currentRevision")), str(s.get("updateRevision"))) for c, s in lifecycles.items()},
        traffic=tuple((t["revisionName"], int(t["percent"]), t.get("tag")) for t in engine.get("traffic") or ()),
        images={c: {p.image for p in seen.of(c).live()} for c in DESIRED},
        samples=tuple(s for history in histories for s in samples_of(history)),
        ended_at=ended_at,
    )


def check_expected(outcome: Outcome, variant: Variant) -> None:
    """The undisturbed run ends as the variant says it must."""
    assert (outcome.run_outcome, outcome.phase, outcome.current_step, outcome.failed_checks) == (
        variant.run_outcome, variant.phase, variant.current_step, variant.failed_checks
    ), f"the undisturbed {variant.name} run ended otherwise: {outcome}"
    assert outcome.images == {c: {variant.final_image} for c in DESIRED}


def check_samples(outcome: Outcome, variant: Variant) -> None:
    """Each step's samples numbered 1, 2, 3, ... (every verdict applied exactly once), the
    failing ones exactly the failed checks the status shows, the bad image's at its first step."""
    by_step: dict[int, list[Sample]] = {}
    for sample in outcome.samples:
        by_step.setdefault(sample.step, []).append(sample)
    assert by_step, "no sample in the run's history"
    for step, samples in by_step.items():
        numbers = [s.number for s in samples]
        assert numbers == list(range(1, len(numbers) + 1)), (
            f"step {step}'s samples are numbered {numbers}: a verdict was lost or applied twice"
        )
    failed = [s for s in outcome.samples if s.verdict == "Fail"]
    assert len(failed) == outcome.failed_checks == variant.failed_checks, (
        f"{len(failed)} failing sample(s) in the history, {outcome.failed_checks} counted toward failureLimit"
    )
    if variant is BAD:
        assert list(by_step) == [1], f"the bad image was sampled beyond its first step: {outcome.samples}"
        assert outcome.samples[-1].verdict == "Fail", "no sample after the one that reached failureLimit"
    else:
        assert sorted(by_step) == [1, 2, 3], f"the good image was not sampled at every step: {outcome.samples}"


async def kill_while_under_way(
    worker: ProductProcess, sim: KubeSim, namespaces: list[str], rng: random.Random
) -> list[float]:
    """`KILLS` SIGKILLs at random moments, each while every run in `namespaces` is under way;
    the seconds since the changes at which each one landed."""
    started = time.monotonic()
    landed: list[float] = []
    await asyncio.sleep(rng.uniform(*FIRST_KILL_AFTER))
    for kill in range(KILLS):
        if kill:
            await asyncio.sleep(rng.uniform(*KILL_AFTER_SECONDS))
        for namespace in namespaces:
            phase = await asyncio.to_thread(canary_phase, sim, namespace)
            assert phase not in ("Stable", "RolledBack"), (
                f"{namespace}'s canary ended ({phase}) before kill {kill + 1}: the kills must land during it"
            )
        worker.kill()
        landed.append(time.monotonic() - started)
        await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
        await asyncio.to_thread(worker.start)
    return landed


async def test_worker_killed_five_times_during_canaries_with_analysis_ends_as_undisturbed_runs(
    dev_server: WorkflowEnvironment, cluster: KubeSim, prometheus: RunningPrometheus, tmp_path: Path
) -> None:
    client = dev_server.client
    address = client.service_client.config.target_host
    queues = {role: f"tq-{role}-{uuid4()}" for role in ROLES}
    namespaces = {(v.name, role): f"canary-{v.name}-{role}-{uuid4().hex[:6]}" for v in VARIANTS for role in ROLES}
    env = {f"{ENV_PREFIX}PROMETHEUS__URL": prometheus.url}
    workers = {
        role: worker_process(address, queue, cluster.kubeconfig_path, tmp_path / f"worker-{role}.log", env)
        for role, queue in queues.items()
    }
    # The watcher signals workflows by ID, whichever task queue runs them.
    watcher = watcher_process(address, queues["calm"], cluster.kubeconfig_path, tmp_path / "watcher.log")
    for namespace in namespaces.values():
        prepare(cluster, namespace)
    await asyncio.gather(*(asyncio.to_thread(p.start) for p in (*workers.values(), watcher)))
    try:
        for (_, role), namespace in namespaces.items():
            await apply(client, queues[role], manifest(namespace, IMAGE_1))
        stable = {"engine": IMAGE_1, "decoder": IMAGE_1}
        await asyncio.gather(*(until_settled(cluster, ns, stable, SETTLE_WITHIN) for ns in namespaces.values()))

        samplers = {key: CanarySampler(cluster, namespace) for key, namespace in namespaces.items()}
        async with contextlib.AsyncExitStack() as watching:
            for sampler in samplers.values():
                await watching.enter_async_context(sampler)
            began = time.monotonic()
            for variant in VARIANTS:
                for role in ROLES:
                    changed = await apply(client, queues[role], manifest(namespaces[variant.name, role], variant.image))
                    assert changed.generation == 2
            chaos = [namespaces[v.name, "chaos"] for v in VARIANTS]
            landed = await kill_while_under_way(workers["chaos"], cluster, chaos, random.Random(SEED))
            ends = await asyncio.gather(
                *(outcome_of(client, cluster, namespaces[v.name, role], v) for v in VARIANTS for role in ROLES)
            )
        outcomes = dict(zip(((v.name, role) for v in VARIANTS for role in ROLES), ends, strict=True))
        again = sum(s.attempts > 1 for o in outcomes.values() for s in o.samples)
        ended = ", ".join(f"{key[0]} {key[1]} {o.ended_at - began:.0f} s" for key, o in outcomes.items())
        print(f"kills at {', '.join(f'{t:.1f}' for t in landed)} s; canaries ended: {ended}; all settled "
              f"{time.monotonic() - began:.0f} s after the changes; {again} sample(s) asked again after a kill")

        assert workers["chaos"].starts == KILLS + 1
        for variant in VARIANTS:
            calm, killed = outcomes[variant.name, "calm"], outcomes[variant.name, "chaos"]
            check_expected(calm, variant)
            assert killed.verdict() == calm.verdict(), (
                f"the killed {variant.name} run ended otherwise than the undisturbed one:\n"
                f"killed:      {killed.verdict()}\nundisturbed: {calm.verdict()}"
            )
            for outcome in (calm, killed):
                check_samples(outcome, variant)
        for (name, _), sampler in samplers.items():
            sampler.check_canary(GOOD if name == GOOD.name else BAD)
    finally:
        for worker in workers.values():
            worker.kill()
        watcher.stop(within=10)
