"""Canary groups end to end on kubesim with a real Prometheus (spec reference §1-§3): the
InferenceService opens a `Rollout` run, its canary moves a share of the engine and decoder
Instances to the new revision, and the analysis queries the Prometheus that scrapes kubesim's
simulated inference traffic. A bad image (errors above the threshold) rolls back by itself
within `failureLimit` samples while the stable revision keeps serving; a good one passes
step by step to `Stable`; Prometheus stopped mid-analysis stalls it into `Failed` with
`AnalysisStalled` under `onInconclusive: Hold`.

Real time throughout (kubesim and Prometheus run on the wall clock); the step timelines that
need minutes are in `test_rollout_canary.py` on the time-skipping server.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from kubesim.handle import KubeSim
from models.canary_analysis import CanaryAnalysisConfig, CanarySettingsResult
from tests.fixtures.prometheus import RunningPrometheus
from tests.workflows.rollout_examples import NAME, NAMESPACE, pd_manifest, pd_runtime
from tests.workflows.service_harness import IMAGE_1, IMAGE_2, Story, eventually, story
from tests.workflows.test_service_rollout import run_outcome, serving_images, settled
from workflows.service.messages import RolloutStatusView
from workflows.service.workflow import InferenceServiceWorkflow

pytestmark = pytest.mark.workflows

BAD_IMAGE = "docker.io/lmsysorg/sglang:v0.4.7-bad"
FAST = {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 1, "update_retry": None}
SELECTOR = (
    'namespace="{{.Namespace}}",inferenceservice="{{.ISVCName}}",component="{{.Component}}",'
    'revision_hash="{{.CanaryRevision}}"'
)
ERROR_RATE = {
    "name": "error_rate",
    "query": f'sum(rate(ome_inference_requests_total{{{SELECTOR},code="500"}}[10s])) '
    f"/ sum(rate(ome_inference_requests_total{{{SELECTOR}}}[10s]))",
    "operator": "LT",
    "threshold": "0.05",
}


def canary_rollout(on_inconclusive: str = "Hold", ready_timeout: str = "2m") -> dict[str, Any]:
    analysis = {
        "interval": "2s", "initialDelay": "4s", "failureLimit": 2, "onInconclusive": on_inconclusive,
        "metrics": [ERROR_RATE],
    }
    return {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "canary": {
                    "steps": [
                        {"capacity": "50%", "traffic": 50, "analysis": analysis},
                        {"capacity": "100%", "traffic": 100, "analysis": analysis},
                    ],
                    "readyTimeout": ready_timeout,
                },
            }
        ]
    }


@pytest.fixture
def prometheus(kubesim: KubeSim, tmp_path: Path) -> Iterator[RunningPrometheus]:
    with RunningPrometheus(tmp_path, {"kubesim": f"127.0.0.1:{kubesim.port}"}, interval_seconds=1) as running:
        yield running


def canary_story(client: Client, task_queue: str, sim: KubeSim, prometheus: RunningPrometheus) -> Any:
    namespace = f"{NAMESPACE}-{uuid4().hex[:6]}"
    settings = CanarySettingsResult(analysis=CanaryAnalysisConfig(bundled_prometheus_address=prometheus.url))
    return story(client, task_queue, sim, cluster=FAST, name=NAME, namespace=namespace, runtime=pd_runtime(),
                 canary=settings)


def manifest(s: Story, rollout: dict[str, Any], image: str | None = None) -> dict[str, Any]:
    return pd_manifest(s.namespace, copy.deepcopy(rollout), image, (2, 2))


async def rollout_status(s: Story) -> RolloutStatusView:
    return await s.handle().query(InferenceServiceWorkflow.rollout_status)


def engine_status(s: Story) -> dict[str, Any]:
    isvc = s.object("inferenceservices", NAME) or {}
    return ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}


async def phase_is(s: Story, phase: str) -> dict[str, Any] | None:
    shown = engine_status(s)
    return shown if shown.get("rolloutPhase") == phase else None


async def test_a_bad_image_rolls_back_within_the_failure_limit_and_the_stable_revision_keeps_serving(
    dev_client: Client, task_queue: str, kubesim: KubeSim, prometheus: RunningPrometheus
) -> None:
    kubesim.set_engine_behavior(BAD_IMAGE, error_ratio=0.3)
    async with canary_story(dev_client, task_queue, kubesim, prometheus) as s:
        await s.apply(manifest(s, canary_rollout()))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=60)
        stable_served: list[int] = []
        await s.apply(manifest(s, canary_rollout(), BAD_IMAGE))
        for _ in range(600):
            stable_served.append(serving_images(s, "engine").count(IMAGE_1))
            if await phase_is(s, "RolledBack"):
                break
            await eventually(lambda: True, "a tick", within=1)
        rolled = await eventually(lambda: phase_is(s, "RolledBack"), "the canary to roll back", within=60)
        canary = rolled["canary"]
        assert canary["analysisFailedChecks"] == 2 and canary["currentStep"] == 0
        assert canary["rolledBackRevisionHash"]
        assert any(r["name"] == "error_rate" and not r["passed"] for r in canary["metricResults"])
        assert min(stable_served) >= 1, "the stable revision served throughout"
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "all back on the stable image")
        reasons = [e.reason for e in s.core.list_namespaced_event(s.namespace).items]
        assert "RolloutRunClosed" in reasons and "CanaryRollingBack" in reasons
        shown = await rollout_status(s)
        assert shown.reported == "RolledBack"
        why = await s.handle().query(InferenceServiceWorkflow.explain, "engine")
        assert "rolled back to stable revision" in why.summary and "released by retry" in why.summary, why.summary


async def test_a_good_image_passes_analysis_step_by_step_to_stable(
    dev_client: Client, task_queue: str, kubesim: KubeSim, prometheus: RunningPrometheus
) -> None:
    async with canary_story(dev_client, task_queue, kubesim, prometheus) as s:
        await s.apply(manifest(s, canary_rollout()))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=60)
        # No run yet: the Update is refused with the reference's text, and nothing is recorded.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await s.handle().execute_update("promote", None, result_type=str)
        assert str(refused.value.cause.message) == (
            "action refused: no applicable active rollout or lifecycle work was observed"
        )
        await s.apply(manifest(s, canary_rollout(), IMAGE_2))
        assert await eventually(lambda: run_outcome(s, 2), "the canary run to complete", within=120) == "Completed"
        stable = await eventually(lambda: phase_is(s, "Stable"), "the canary to be Stable")
        assert stable["canary"]["currentStep"] == 2
        # Cleared once complete (§2.6), on the object too: the status patch drops what it no longer shows.
        assert "stableRevisionHash" not in stable["canary"] and "capacityWaitSince" not in stable["canary"]
        assert "rolloutHold" not in stable["lifecycle"], stable["lifecycle"]
        assert all(r["passed"] for r in stable["canary"]["metricResults"])
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_2), "all on the new image")
        assert [t["percent"] for t in stable["traffic"]] == [100]


async def test_prometheus_stopped_mid_analysis_fails_the_canary_as_stalled_under_hold(
    dev_client: Client, task_queue: str, kubesim: KubeSim, prometheus: RunningPrometheus
) -> None:
    async with canary_story(dev_client, task_queue, kubesim, prometheus) as s:
        rollout = canary_rollout(on_inconclusive="Hold", ready_timeout="12s")
        # A long minimum bake: passing samples keep the canary at its first step.
        rollout["groups"][0]["canary"]["steps"][0]["pause"] = {"duration": "1h"}
        await s.apply(manifest(s, rollout))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=60)
        await s.apply(manifest(s, rollout, IMAGE_2))
        await eventually(lambda: _sampled(s), "a first conclusive sample", within=60)
        prometheus.stop()
        failed = await eventually(lambda: phase_is(s, "Failed"), "the stalled canary to fail", within=60)
        assert failed["canary"]["failed"]["reason"] == "AnalysisStalled"
        assert any(r["value"] == "" and r["message"] for r in failed["canary"]["metricResults"]), "inconclusive samples"
        # Held, not rolled back: the canary's Instances and weight stay.
        assert failed["canary"]["currentStep"] == 0 and sorted(serving_images(s, "engine")) == sorted([IMAGE_1, IMAGE_2])


async def _sampled(s: Story) -> bool:
    canary = engine_status(s).get("canary") or {}
    return canary.get("lastConclusiveEvaluationTime") is not None
