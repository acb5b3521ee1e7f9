"""Canary groups in the Rollout workflow on the time-skipping server, its parent stood in for
and the Prometheus sample answering from recorded verdicts (spec reference §1-§3): steps of
new-revision capacity, timed, manual and analysis gates on workflow time, rollback within
`failureLimit` samples, operator requests as Updates, and parking on an unbound provider.

The sample activity itself is tested against a real Prometheus in `tests/activities`.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.settings import SettingsActivities
from models.canary_analysis import (
    PROMETHEUS_ANALYSIS_SAMPLE,
    AnalysisSampleInput,
    AnalysisSampleResult,
    CanaryAnalysisConfig,
    CanarySettingsResult,
    MetricProviderBinding,
    MetricResult,
)
from tests.fixtures.metrics_scrape import Sample, metrics_client, scrape_samples
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.rollout_parent import FakeRolloutParent
from workers.worker import build_worker
from workflows.names import rollout_workflow_id
from workflows.rollout.messages import (
    CanaryRequest,
    ComponentCounts,
    RolloutInput,
    RolloutReport,
    RolloutView,
)

pytestmark = pytest.mark.workflows

ERROR_RATE = {"name": "error_rate", "query": "x", "operator": "LT", "threshold": "0.05"}
ANALYSIS = {"interval": "1m", "failureLimit": 2, "metrics": [ERROR_RATE]}


def canary(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"groups": [{"components": ["engine", "decoder"], "canary": {"steps": list(steps), **extra}}]}


@dataclass
class RecordedSamples:
    """Answers each sample with the next recorded verdict (Pass when the record runs out)."""

    verdicts: list[str] = field(default_factory=list)
    taken: list[AnalysisSampleInput] = field(default_factory=list)
    lost: set[int] = field(default_factory=set)
    """Samples (1-based, in the order taken) whose first attempt dies with its worker."""
    attempts: list[AnalysisSampleInput] = field(default_factory=list)

    def activity(self) -> Callable[..., Any]:
        @activity.defn(name=PROMETHEUS_ANALYSIS_SAMPLE)
        async def sample(arg: AnalysisSampleInput) -> AnalysisSampleResult:
            self.attempts.append(arg)
            if activity.info().attempt == 1 and len(self.taken) + 1 in self.lost:
                raise RuntimeError("the worker died mid-sample")
            self.taken.append(arg)
            verdict = self.verdicts.pop(0) if self.verdicts else "Pass"
            value = {"Pass": "0.01", "Fail": "0.21", "Inconclusive": ""}[verdict]
            result = MetricResult(
                name="error_rate", value=value, threshold="0.05", operator="LT", passed=verdict == "Pass",
                message="no data" if verdict == "Inconclusive" else "", time=arg.time,
            )
            shown = {"Pass": "error_rate 0.01 < 0.05", "Fail": "error_rate 0.21 >= 0.05", "Inconclusive": "error_rate: no data"}
            summary = f"step {arg.step_number} sample {arg.sample_number}: {verdict} ({shown[verdict]})"
            return AnalysisSampleResult(verdict=verdict, metric_results=[result], summary=summary)

        return sample


class Run:
    def __init__(
        self, env: WorkflowEnvironment, cluster: FakeCluster, samples: RecordedSamples, task_queue: str,
        metrics_address: str | None = None,
    ) -> None:
        self.env, self.cluster, self.samples, self.task_queue = env, cluster, samples, task_queue
        self.metrics_address = metrics_address
        """Where the worker serves `/metrics` (the `run` fixture's worker does)."""
        self.namespace = f"ns-{uuid4().hex[:8]}"
        self.parent: WorkflowHandle[Any, Any] | None = None
        self.handle: WorkflowHandle[Any, RolloutView] | None = None
        self.replicas: dict[str, int] = {}

    async def start(self, rollout: dict[str, Any], replicas: dict[str, int]) -> None:
        client = self.env.client
        self.replicas = replicas
        self.parent = await client.start_workflow(
            "FakeRolloutParent", id=f"isvc/{self.namespace}/chat", task_queue=self.task_queue
        )
        self.handle = await client.start_workflow(
            "Rollout",
            RolloutInput(
                namespace=self.namespace, isvc="chat", run=2, rollout=rollout,
                targets={name: f"{name}-new" for name in replicas},
                previous={name: f"{name}-old" for name in replicas},
                replicas=replicas, min_replicas=replicas, parent_workflow_id=self.parent.id,
            ),
            id=rollout_workflow_id(self.namespace, "chat", 2),
            task_queue=self.task_queue,
            result_type=RolloutView,
        )

    async def serve(self, component: str, on_new: int, revision: str | None = None) -> None:
        """`on_new` Instances on (and serving) the canary revision; with `revision` the
        InferenceReplica moves back to it (a rollback), `on_new` still on the canary."""
        assert self.handle is not None
        replicas = self.replicas[component]
        if revision is None:
            counts = ComponentCounts(component=component, revision=f"{component}-new", replicas=replicas,
                                     updated=on_new, updated_serving=on_new, serving=replicas)
        else:
            back = replicas - on_new
            counts = ComponentCounts(component=component, revision=revision, replicas=replicas,
                                     updated=back, updated_serving=back, serving=replicas)
        await self.handle.signal("progress", counts)

    async def serve_all(self, engine: int, decoder: int) -> None:
        await self.serve("engine", engine)
        await self.serve("decoder", decoder)

    async def until(self, test: Callable[[RolloutReport], bool], step: float = 1.0, tries: int = 200) -> RolloutReport:
        assert self.parent is not None
        last = None
        for _ in range(tries):
            reports = await self.parent.query("reports", result_type=list[RolloutReport])
            if reports and test(reports[-1]):
                return reports[-1]
            last = reports[-1] if reports else None
            await self.env.sleep(step)
        raise AssertionError(f"never reported; last: {last}")

    async def metric(self, name: str, **labels: str) -> float | None:
        """The worker's current value of `name` for this run's InferenceService (None: no series)."""
        assert self.metrics_address is not None
        mine = {"namespace": self.namespace, **labels}
        found = [s.value for s in await scrape_samples(self.metrics_address) if s.name == name and s.has(**mine)]
        return sum(found) if found else None

    async def ask(self, request: CanaryRequest) -> str:
        assert self.handle is not None
        return await self.handle.execute_update("canary", request, result_type=str)


def limits(report: RolloutReport) -> dict[str, int]:
    return {name: a.limit for name, a in report.allowances.items()}


def canary_of(report: RolloutReport) -> dict[str, Any]:
    return report.canary["engine"]["canary"]


def phase(report: RolloutReport) -> str:
    return str(report.canary.get("engine", {}).get("rolloutPhase"))


@pytest_asyncio.fixture(loop_scope="session")
async def run(workflow_env: WorkflowEnvironment, task_queue: str) -> AsyncIterator[Run]:
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    samples = RecordedSamples()
    settings = CanarySettingsResult(
        analysis=CanaryAnalysisConfig(
            bundled_prometheus_address="http://127.0.0.1:9",
            metric_providers={"team-prometheus": MetricProviderBinding(server_address="http://127.0.0.1:9")},
        ),
        default_ready_timeout="15m",
    )
    activities = [*cluster.activities(), *SettingsActivities(settings).activities(), samples.activity()]
    # The worker reports through a runtime serving Prometheus metrics, as the product's worker does.
    client, address = await metrics_client(workflow_env.client)
    async with build_worker(client, task_queue, None, activities=activities, extra_workflows=[FakeRolloutParent]):
        yield Run(workflow_env, cluster, samples, task_queue, address)


async def test_a_timed_step_then_analysis_then_the_last_step_reach_stable(run: Run) -> None:
    await run.start(
        canary(
            {"capacity": "25%", "traffic": 10, "pause": {"duration": "5m"}},
            {"capacity": "50%", "traffic": 50, "analysis": ANALYSIS},
            {"capacity": "100%", "traffic": 100},
        ),
        {"engine": 4, "decoder": 2},
    )
    first = await run.until(lambda r: "engine" in r.allowances)
    # ceil(25% x 4) = 1 engine, ceil(25% x 2) = 1 decoder; nothing else moves.
    assert limits(first) == {"engine": 1, "decoder": 1} and phase(first) == "Pending"
    await run.serve_all(1, 1)
    timed = await run.until(lambda r: canary_of(r).get("stepEnteredTime") is not None)
    assert canary_of(timed)["currentStep"] == 0 and limits(timed) == {"engine": 1, "decoder": 1}
    # Four minutes into the 5m timed gate: still at step 1.
    await run.env.sleep(timedelta(minutes=4).total_seconds())
    assert canary_of(await run.until(lambda r: True))["currentStep"] == 0
    second = await run.until(lambda r: canary_of(r)["currentStep"] == 1, step=10)
    assert limits(second) == {"engine": 2, "decoder": 1}
    await run.serve_all(2, 1)
    # Analysis: the first passing sample advances the step.
    third = await run.until(lambda r: canary_of(r)["currentStep"] == 2, step=10)
    assert limits(third) == {"engine": 4, "decoder": 2}
    assert [s.step_number for s in run.samples.taken] == [2]
    await run.serve_all(4, 2)
    assert run.handle is not None
    result = await run.handle.result()
    assert result.outcome == "Completed"
    final = await run.until(lambda r: r.outcome == "Completed")
    assert phase(final) == "Stable" and canary_of(final)["currentStep"] == 3


async def test_failing_samples_roll_the_canary_back_within_the_failure_limit(run: Run) -> None:
    run.samples.verdicts[:] = ["Fail", "Pass", "Fail", "Pass", "Pass"]
    await run.start(
        # A 10-minute minimum bake: a pass cannot advance the step before it ends.
        canary({"capacity": "50%", "traffic": 50, "analysis": ANALYSIS, "pause": {"duration": "10m"}},
               {"capacity": "100%", "traffic": 100}),
        {"engine": 2, "decoder": 2},
    )
    await run.until(lambda r: "engine" in r.allowances)
    await run.serve_all(1, 1)
    # Fail, Pass, Fail: passes never reset the count, so the second failure rolls it back.
    rolling = await run.until(lambda r: phase(r) == "RollingBack", step=10)
    assert {name: (a.limit, a.rollback_to) for name, a in rolling.allowances.items()} == {
        "engine": (0, "engine-old"), "decoder": (0, "decoder-old")
    }
    assert canary_of(rolling)["analysisFailedChecks"] == 2 and len(run.samples.taken) == 3
    await run.serve("engine", 0, revision="engine-old")
    await run.serve("decoder", 0, revision="decoder-old")
    rolled = await run.until(lambda r: phase(r) == "RolledBack")
    assert rolled.outcome is None, "a rolled-back run keeps the components on the stable revision"
    assert ("RolloutRunClosed", "run 2 closed: RolledBack") in run.cluster.events
    # The rollback as an operator's dashboard and the OmeCanaryRolledBack alert see it (§2.7).
    engine = {"isvc": "chat", "component": "engine"}
    assert await run.metric("ome_canary_rollback_total", cause="analysis", **engine) == 1
    assert await run.metric("ome_canary_analysis_evaluations_total", result="fail", **engine) == 2
    assert await run.metric("ome_canary_analysis_evaluations_total", result="pass", **engine) == 1
    assert await run.metric("ome_canary_traffic_weight", **engine) == 0
    # After an analysis rollback promote and rollback have nothing to act on.
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.ask(CanaryRequest(action="promote"))
    assert "action refused: no applicable active rollout or lifecycle work was observed" in str(refused.value.cause)


async def test_a_sample_whose_worker_died_is_asked_again_for_the_same_instant_and_counted_once(run: Run) -> None:
    """A lost attempt is no inconclusive sample: under `onInconclusive: Rollback` it would roll a
    healthy canary back because a worker crashed."""
    run.samples.verdicts[:] = ["Fail", "Pass"]
    run.samples.lost = {1}
    analysis = {**ANALYSIS, "onInconclusive": "Rollback"}
    await run.start(
        canary({"capacity": "50%", "traffic": 50, "analysis": analysis}, {"capacity": "100%", "traffic": 100}),
        {"engine": 2, "decoder": 2},
    )
    await run.until(lambda r: "engine" in r.allowances)
    await run.serve_all(1, 1)
    judged = await run.until(lambda r: canary_of(r)["analysisFailedChecks"] > 0 or phase(r) == "RollingBack", step=5)
    assert phase(judged) != "RollingBack", f"a lost attempt rolled the canary back: {canary_of(judged)}"
    assert canary_of(judged)["analysisFailedChecks"] == 1, "the retried sample's Fail counts once"
    advanced = await run.until(lambda r: canary_of(r)["currentStep"] == 1, step=10)
    assert phase(advanced) != "RollingBack"
    lost, again, second = run.samples.attempts
    assert (again.time, again.sample_number) == (lost.time, lost.sample_number) == (lost.time, 1)
    assert second.sample_number == 2 and second.time > lost.time
    assert run.samples.taken == [again, second]


async def test_a_manual_gate_waits_for_promote_and_refuses_it_elsewhere(run: Run) -> None:
    await run.start(
        canary({"capacity": 1, "traffic": 20, "pause": {"duration": "1h"}}, {"capacity": 1, "traffic": 50, "pause": {}},
               {"capacity": "100%", "traffic": 100}),
        {"engine": 2, "decoder": 2},
    )
    await run.until(lambda r: "engine" in r.allowances)
    await run.serve_all(1, 1)
    await run.until(lambda r: canary_of(r).get("stepEnteredTime") is not None)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await run.ask(CanaryRequest(action="promote"))
    assert str(refused.value.cause.message) == (
        "action refused: promote requires an active indefinite manual gate; analysis requires explicit override"
    )
    manual = await run.until(lambda r: canary_of(r)["currentStep"] == 1, step=60)
    await run.env.sleep(timedelta(hours=3).total_seconds())
    assert canary_of(await run.until(lambda r: True))["currentStep"] == 1, "a manual gate never opens by time"
    assert phase(manual) in ("Paused", "Pending")
    # `rollout status` and `explain` say what the group waits for: the manual gate, and promote.
    at_gate = await run.until(lambda r: phase(r) == "Paused")
    assert {row.component: (row.gate, row.release) for row in at_gate.rows} == {
        "engine": ("Manual", "promote"), "decoder": ("Manual", "promote")
    }
    accepted = await run.ask(CanaryRequest(action="promote", request_id="p-1"))
    assert "promote accepted" in accepted
    last = await run.until(lambda r: canary_of(r)["currentStep"] == 2)
    assert limits(last) == {"engine": 2, "decoder": 2}


async def test_an_unbound_metric_provider_parks_the_run(run: Run) -> None:
    rollout = canary({"capacity": "100%", "traffic": 100, "analysis": ANALYSIS})
    rollout["groups"][0]["canary"]["prometheus"] = {"providerRef": {"name": "cluster-prometheus"}}
    await run.start(rollout, {"engine": 1, "decoder": 1})
    parked = await run.until(lambda r: r.parked_reason is not None)
    assert parked.parked_reason == "ProviderUnbound"
    assert parked.parked_message == (
        'groups[0]: metric provider "cluster-prometheus" is not bound in this cluster\'s metricProviders configuration'
    )
    assert "RolloutPlanParked" in run.cluster.reasons()
    assert parked.allowances == {}, "a parked run never falls back: nothing moves"


async def test_repin_moves_the_running_canary_onto_the_live_plan_and_refuses_a_topology_change(run: Run) -> None:
    pinned = canary(
        {"capacity": 1, "traffic": 10, "pause": {}}, {"capacity": 1, "traffic": 30, "pause": {}},
        {"capacity": "100%", "traffic": 100},
    )
    await run.start(pinned, {"engine": 2, "decoder": 2})
    await run.until(lambda r: "engine" in r.allowances)
    await run.serve_all(1, 1)
    await run.until(lambda r: canary_of(r).get("stepEnteredTime") is not None)
    await run.ask(CanaryRequest(action="promote"))
    at_second = await run.until(lambda r: canary_of(r)["currentStep"] == 1)
    assert at_second.plan_digest is not None

    def answered(request_id: str) -> Callable[[RolloutReport], bool]:
        return lambda r: any(a.request_id == request_id for a in r.answers)

    def answer_of(report: RolloutReport, request_id: str) -> tuple[bool, str]:
        found = next(a for a in report.answers if a.request_id == request_id)
        return found.accepted, found.message

    # Another topology (a second group) is refused; a stale digest is rejected with an Event.
    other = {**copy.deepcopy(pinned), "groupOrdering": "Concurrent"}
    other["groups"].append({"components": ["router"]})
    await run.ask(CanaryRequest(action="repin", revision="now", rollout=other, request_id="r-1"))
    refused = await run.until(answered("r-1"))
    assert answer_of(refused, "r-1") == (False, "rollout repin refused: live and pinned rollout topology differ")
    live = canary({"capacity": 1, "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100})
    await run.ask(CanaryRequest(action="repin", revision="rp1:000000000000", rollout=live, request_id="r-2"))
    rejected = await run.until(answered("r-2"))
    assert not answer_of(rejected, "r-2")[0] and "a concurrent edit landed" in answer_of(rejected, "r-2")[1]
    assert "RolloutRepinRejected" in run.cluster.reasons()
    # `now`: the two-step live plan; the canary stays at its second step, now the last one.
    await run.ask(CanaryRequest(action="repin", revision="now", rollout=live, request_id="r-3"))
    applied = await run.until(answered("r-3"))
    accepted, message = answer_of(applied, "r-3")
    assert accepted and message.startswith("run 2 repinned: ") and applied.plan_digest != at_second.plan_digest
    assert canary_of(applied)["currentStep"] == 1 and "RolloutPlanRepinned" in run.cluster.reasons()
    # §4's counter: the controller's verdicts only (the topology refusal is the CLI's in OME).
    assert await run.metric("ome_rollout_repin_total", outcome="applied") == 1
    assert await run.metric("ome_rollout_repin_total", outcome="rejected") == 1


async def test_status_rows_show_the_canary_phase_step_gate_and_traffic(run: Run) -> None:
    await run.start(canary({"capacity": "50%", "traffic": 30, "pause": {}}, {"capacity": "100%", "traffic": 100}),
                    {"engine": 2, "decoder": 2})
    await run.until(lambda r: "engine" in r.allowances)
    await run.serve_all(1, 1)
    shown = await run.until(lambda r: r.rows[0].phase == "Paused")
    engine = next(row for row in shown.rows if row.component == "engine")
    # 30% recorded for the new revision; it is 1 of the 2 ready engines, so it sees half the requests.
    assert (engine.strategy, engine.phase, engine.step, engine.traffic) == ("Canary", "Paused", "1/2", "30% -> 50%")
    assert (engine.gate, engine.release) == ("Manual", "promote")
    assert shown.reported == "Paused"


async def test_the_worker_serves_the_canary_metrics(workflow_env: WorkflowEnvironment, task_queue: str) -> None:
    """`ome_canary_*` on the worker's `/metrics` (spec reference §2.7), emitted by the Rollout."""
    client, address = await metrics_client(workflow_env.client)
    cluster, samples = FakeCluster(client=workflow_env.client), RecordedSamples()
    activities = [*cluster.activities(), *SettingsActivities().activities(), samples.activity()]
    async with build_worker(client, task_queue, None, activities=activities, extra_workflows=[FakeRolloutParent]):
        run = Run(workflow_env, cluster, samples, task_queue)
        await run.start(canary({"capacity": "100%", "traffic": 100, "analysis": ANALYSIS}), {"engine": 1, "decoder": 1})
        await run.until(lambda r: "engine" in r.allowances)
        await run.serve_all(1, 1)
        assert run.handle is not None
        assert (await run.handle.result()).outcome == "Completed"
        scraped = await scrape_samples(address)
    mine = {"component": "engine", "isvc": "chat", "namespace": run.namespace}
    found = {(s.name, extra_labels(s)) for s in scraped if s.has(**mine)}
    for expected in (
        ("ome_canary_current_step", ()),
        ("ome_canary_analysis_evaluations_total", (("result", "pass"),)),
        ("ome_canary_analysis_metric_value", (("metric", "error_rate"),)),
    ):
        assert expected in found, (expected, sorted(found))
    # §2.7: completions are counted per InferenceService, without a component label.
    completed = [s for s in scraped if s.name == "ome_canary_complete_total" and s.has(isvc="chat", namespace=run.namespace)]
    assert [s.value for s in completed] == [1.0] and "component" not in completed[0].labels, completed
    weight = [s.value for s in scraped if s.name == "ome_canary_traffic_weight" and s.has(**mine)]
    assert weight == [0.0], "the weight reads 0 once the canary completed"


def extra_labels(sample: Sample) -> tuple[tuple[str, str], ...]:
    """The labels beyond the object's and those the meter adds to every series."""
    common = ("namespace", "isvc", "component", "service_name", "task_queue", "workflow_type", "namespace_name")
    return tuple(sorted((k, v) for k, v in sample.labels.items() if k not in common))
