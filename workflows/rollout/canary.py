"""Canary groups inside the `Rollout` workflow (spec reference §1-§5): the glue between the
run's state and the pure canary machine (`planning.rollout.canary`).

On every pass the Rollout builds each canary group's observation from the counts its
InferenceReplicas reported, applies the operator requests that arrived (promote, rollback,
retry: refused ones become Warning Events), calls `machine.step`, records the Events it
decided, and turns its capacities into the allowances the InferenceReplicas obey (a step
replaces Instances: the limit is the step's count on the canary revision; rolling back,
0 and the stable revision to return to). A sample the machine asks for is one activity
(`prometheus.analysis_sample`); its verdict enters the next pass, and the wait after it
carries the verdict as its summary (`step 2 sample 3: Fail (error_rate 0.21 >= 0.05)`), so
the history reads as the analysis record.

The canary state travels in `RolloutState.canaries` (group index -> `CanaryState` in JSON),
so it survives continue-as-new and a worker's death.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from models.canary_analysis import (
    PROMETHEUS_ANALYSIS_SAMPLE,
    ROLLOUT_CANARY_SETTINGS,
    AnalysisSampleInput,
    AnalysisSampleResult,
    CanarySettingsResult,
    TemplateFields,
)
from planning.rollout.analysis.source import analysis_limits, check_source, resolve_source
from planning.rollout.canary import steering
from planning.rollout.canary.decision import CanaryDecision
from planning.rollout.canary.machine import step as canary_step
from planning.rollout.canary.observation import CanaryObservation, ComponentObservation, SampleVerdict
from planning.rollout.canary.requests import Mailbox
from planning.rollout.canary.sampling import SampleRequest
from planning.rollout.canary.state import CanaryState, start
from planning.rollout.canary.timeouts import ready_timeout
from planning.rollout.gates import Allowance
from planning.rollout.plan import GroupPlan, Parked, RolloutPlan
from workflows.rollout import canary_metrics
from workflows.rollout.messages import CanaryRequest, ComponentCounts, RolloutState
from workflows.rollout.view import CANARY_STATE

VERDICT: TypeAdapter[SampleVerdict] = TypeAdapter(SampleVerdict)
SETTINGS_TIMEOUT = timedelta(seconds=10)
SAMPLE_GRACE = timedelta(seconds=45)
"""Beyond the queries' own budget: the bearer-token Secret read may take the Kubernetes
client's connect and read timeouts."""
SAMPLE_HEARTBEAT = timedelta(seconds=10)
"""The sample heartbeats while it runs (`activities.prometheus`), so an attempt whose worker
died is noticed after this long rather than after the sample's whole budget."""
SAMPLE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=1.0, maximum_attempts=3)
"""An attempt that did not complete (its worker crashed or was killed) is asked again for the
same instant: an instant query at the sample's `time` measures the same sample, whose verdict
counts once (it answers one sequence number). Only when no attempt completes within the
budget is the sample Inconclusive; a worker's death alone must not turn a canary's verdict
(under `onInconclusive: Rollback` it would roll a healthy canary back)."""


def canary_groups(plan: RolloutPlan) -> list[GroupPlan]:
    return [g for g in plan.groups if g.canary is not None]


def canary_components(plan: RolloutPlan) -> set[str]:
    return {c for g in canary_groups(plan) for c in g.components}


async def read_settings(state: RolloutState) -> CanarySettingsResult:
    """The worker's canary settings, recorded in history (bindings are re-read per sample)."""
    settings: CanarySettingsResult = await workflow.execute_local_activity(
        ROLLOUT_CANARY_SETTINGS,
        result_type=CanarySettingsResult,
        start_to_close_timeout=SETTINGS_TIMEOUT,
        summary="read the worker's canary settings",
    )
    state.canary_settings = settings
    return settings


async def park_reason(state: RolloutState, plan: RolloutPlan) -> Parked | None:
    """At run start: a canary whose `providerRef` names no binding parks the run (§2.2)."""
    if not canary_groups(plan):
        return None
    settings = await read_settings(state)
    for group in canary_groups(plan):
        assert group.canary is not None
        parked = check_source(group.index, group.canary.prometheus, settings.analysis)
        if parked is not None:
            return parked
    return None


def load(state: RolloutState, group: GroupPlan, now: datetime) -> CanaryState:
    stored = state.canaries.get(str(group.index))
    if stored is not None:
        return CANARY_STATE.validate_python(stored)
    targets = {c: state.input.targets[c] for c in group.components if c in state.input.targets}
    stable = {c: state.input.stable.get(c) or state.input.previous.get(c, "") for c in targets}
    return start(str(state.input.run), tuple(group.components), targets, stable, now)


def save(state: RolloutState, group: GroupPlan, canary: CanaryState) -> None:
    state.canaries[str(group.index)] = CANARY_STATE.dump_python(canary, mode="json")


def component_seen(
    state: RolloutState, name: str, counts: ComponentCounts | None, canary: CanaryState
) -> ComponentObservation:
    """A component as the machine reads it: its Instances on (and serving) the canary revision,
    whichever revision its InferenceReplica is moving to (the canary, or back to stable)."""
    target = state.input.targets.get(name, "")
    revision = canary.canary_revisions.get(name, target)
    desired = state.input.min_replicas.get(name)
    if counts is None:
        return ComponentObservation(target, desired, state.input.replicas.get(name, 0), 0)
    if counts.revision == revision:
        on, ready = counts.updated, counts.updated_serving
    else:  # moving back to stable: an Instance still moving off the canary counts as on it
        on = counts.on_revisions.get(revision, max(0, counts.replicas - counts.updated))
        ready = max(0, counts.serving - counts.updated_serving)
    return ComponentObservation(
        target, desired, counts.replicas, ready, on_canary=on, stable_retained=not counts.stable_missing
    )


def observe(state: RolloutState, group: GroupPlan, canary: CanaryState) -> CanaryObservation:
    verdict = state.verdicts.pop(str(group.index), None)
    return CanaryObservation(
        run_id=str(state.input.run),
        components={c: component_seen(state, c, state.counts.get(c), canary) for c in group.components},
        paused=state.paused is not None,
        sample=VERDICT.validate_python(verdict) if verdict is not None else None,
    )


def steer(group: GroupPlan, canary: CanaryState, request: CanaryRequest, paused: bool) -> steering.Steered:
    """An operator request against the canary as it stands (the refusal texts of §3.2)."""
    assert group.canary is not None
    if request.action == "promote":
        return steering.promote(
            group.canary, canary, request.revision, request.override_analysis, request.request_id, paused
        )
    if request.action == "rollback":
        return steering.rollback(canary, request.request_id, paused)
    return steering.retry(canary, request.revision, request.request_id, paused)


def discard_pending(canary: CanaryState) -> CanaryState:
    """The canary without the promote and rollback requests it has not acted on (§5)."""
    return replace(canary, mailbox=Mailbox(retry=canary.mailbox.retry))


def group_for(plan: RolloutPlan, request: CanaryRequest) -> GroupPlan | None:
    groups = canary_groups(plan)
    if request.component is not None:
        return next((g for g in groups if request.component in g.components), None)
    return groups[0] if len(groups) == 1 else None


def all_stable(state: RolloutState, plan: RolloutPlan) -> bool:
    """Every canary group has completed (`Stable`); True without canary groups."""
    return all(
        str(state.canaries.get(str(g.index), {}).get("phase")) == "Stable" for g in canary_groups(plan)
    )


def allowances(decision: CanaryDecision) -> list[Allowance]:
    stable = decision.state.stable_revisions
    return [
        Allowance(name, capacity.limit, rollback_to=capacity.rollback_to, stable=stable.get(name) or None)
        for name, capacity in decision.capacities.items()
    ]


def timeout_seconds(state: RolloutState, group: GroupPlan) -> float | None:
    assert group.canary is not None
    default = state.canary_settings.default_ready_timeout if state.canary_settings is not None else None
    return ready_timeout(state.input.annotations, group.canary, default)


def decide(state: RolloutState, group: GroupPlan, now: datetime) -> CanaryDecision:
    """One call of the machine for `group`, its new state kept."""
    assert group.canary is not None
    canary = load(state, group, now)
    decision = canary_step(group.canary, canary, observe(state, group, canary), now, timeout_seconds(state, group))
    save(state, group, decision.state)
    canary_metrics.record(state.input.namespace, state.input.isvc, canary, decision)
    return decision


async def take_sample(state: RolloutState, group: GroupPlan, request: SampleRequest, canary: CanaryState) -> str:
    """Run the sample `request` asks for; keep its verdict for the next pass; its summary line."""
    assert group.canary is not None
    settings = await read_settings(state)
    limits = analysis_limits(settings.analysis)
    step_number, sample_number = request.step + 1, canary.step_samples + 1
    label = f"step {step_number} sample {sample_number}"
    at = workflow.now()
    sample = AnalysisSampleInput(
        target=resolve_source(group.canary.prometheus, settings.analysis, state.input.namespace),
        metrics=list(request.analysis.metrics),
        fields=TemplateFields(
            namespace=state.input.namespace,
            isvc_name=state.input.isvc,
            component=canary.primary,
            canary_revision=request.canary_revision,
            stable_revision=request.stable_revision or "",
        ),
        time=at,
        query_timeout_seconds=limits.query_timeout_seconds,
        step_number=step_number,
        sample_number=sample_number,
    )
    budget = timedelta(seconds=limits.query_timeout_seconds) + SAMPLE_GRACE
    try:
        result: AnalysisSampleResult = await workflow.execute_activity(
            PROMETHEUS_ANALYSIS_SAMPLE,
            sample,
            result_type=AnalysisSampleResult,
            # One activity is one sample, at its `time`: a retry asks for the same instant, and
            # all attempts share the budget one attempt had.
            schedule_to_close_timeout=budget,
            heartbeat_timeout=SAMPLE_HEARTBEAT,
            retry_policy=SAMPLE_RETRY,
            summary=f"{label}: query Prometheus for {', '.join(m.name for m in request.analysis.metrics)}",
        )
    except ActivityError as error:
        cause = error.cause.message if error.cause is not None else str(error)
        verdict = SampleVerdict(request.sequence, at, "Inconclusive", ())
        state.verdicts[str(group.index)] = VERDICT.dump_python(verdict, mode="json")
        return f"{label}: Inconclusive (the sample did not complete: {cause})"
    results = tuple(r.to_manifest() for r in result.metric_results)
    verdict = SampleVerdict(request.sequence, at, result.verdict, results)
    state.verdicts[str(group.index)] = VERDICT.dump_python(verdict, mode="json")
    return result.summary
