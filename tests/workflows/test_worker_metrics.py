"""The product's metrics on the worker's real `/metrics` endpoint, beside the SDK's: a worker
whose runtime serves Prometheus metrics runs an InferenceService on kubesim (dev server, real
Kubernetes activities), and the scrape shows what an operator's dashboard reads:
create-to-serving and failure-to-recreate histograms, Kubernetes requests by verb, resource and
code with their latency, and the scale-down wave of §14. The state gauges (Instances by phase,
holds, overdue drains) are not the worker's: the controller renders them from the
InferenceReplica object (`planning.controller.state_metrics`), checked here on that object.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.instance import QUERY_STATUS, InstanceStatus
from planning.controller.state_metrics import state_samples
from tests.fixtures.metrics_scrape import Sample, metrics_client, scrape_samples
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    Story,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
)

pytestmark = pytest.mark.workflows

MINE = {"namespace": NAMESPACE, "isvc": NAME, "component": "engine"}


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    found = [s.value for s in samples if s.name == name and s.has(**labels)]
    return sum(found) if found else None


def state_shown(s: Story, phase: str, count: int) -> list[Sample] | None:
    """The state gauges the controller renders from the InferenceReplica, when `phase` counts `count`."""
    ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
    samples = [Sample(x.name, dict(x.labels), x.value) for x in state_samples([ir], datetime.now(UTC))]
    return samples if value(samples, "ome_instances", phase=phase, **MINE) == count else None


async def test_the_worker_serves_instance_kube_and_wave_metrics(
    dev_server: WorkflowEnvironment, task_queue: str, kubesim: KubeSim
) -> None:
    client, address = await metrics_client(dev_server.client)
    recreate = {"lifecycle": {"restartPolicy": "RecreateInstanceOnPodRestart"}}
    async with story(client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest(**recreate))
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")

        async def both_served() -> list[Sample] | None:
            samples = await scrape_samples(address)
            return samples if value(samples, "ome_instance_create_to_serving_seconds_count", **MINE) == 2 else None

        samples = await eventually(both_served, "two creates to serving on /metrics", within=20)
        state = await eventually(lambda: state_shown(s, "Ready", 2), "ome_instances{phase=Ready} at 2 from the IR")
        assert value(state, "ome_instances", phase="Creating", **MINE) == 0, "an emptied phase reads 0"
        assert value(state, "ome_instance_drains_overdue", **MINE) == 0
        assert value(state, "ome_rollout_hold_since_timestamp_seconds", gate="Budget", **MINE) == 0
        for name in ("ome_instances", "ome_instance_drains_overdue", "ome_rollout_hold_since_timestamp_seconds",
                     "ome_omenative_scale_down_active_pods"):  # fmt: skip
            assert value(samples, name) is None, f"{name} is the controller's, not a worker's (stale after a move)"
        buckets = {s.labels["le"] for s in samples if s.name == "ome_instance_create_to_serving_seconds_bucket"}
        assert {"1", "30", "1800"} <= buckets, f"the product's buckets, not the SDK's default: {sorted(buckets)}"
        created = value(samples, "ome_kube_requests_total", verb="create", resource="pods", code="201")
        assert created is not None and created >= 2, "each Instance created its pod"
        assert value(samples, "ome_kube_requests_total", verb="patch", resource="pods/status") is not None
        assert value(samples, "ome_kube_request_duration_seconds_count", verb="create", resource="pods")
        # The SDK's own metrics are still served on the same endpoint (the alerts read its pollers).
        assert value(samples, "temporal_num_pollers", poller_type="workflow_task", task_queue=task_queue)

        # A pod failure under RecreateInstanceOnPodRestart: the Instance recreates its pods.
        s.sim.kill_pod(NAMESPACE, f"{NAME}-engine-1-default-0")
        handle = client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-1")

        async def recreated() -> bool:
            status = await handle.query(QUERY_STATUS, result_type=InstanceStatus)
            return status.incarnation == 2 and status.phase == "Ready"

        await eventually(recreated, "Instance 1 recreated after its pod failed")
        samples = await scrape_samples(address)
        assert value(samples, "ome_instance_pod_failure_to_recreate_seconds_count", **MINE) == 1

        # Scale down to one: a wave removes Instance 1 (one pod) and the gauges settle at 0.
        await s.apply(isvc_manifest(**recreate, minReplicas=1, maxReplicas=1))

        async def wave_done() -> list[Sample] | None:
            samples = await scrape_samples(address)
            state = state_shown(s, "Ready", 1)
            settled = state is not None and value(state, "ome_omenative_scale_down_active_pods", **MINE) == 0
            waved = value(samples, "ome_omenative_scale_down_batch_pods_count", **MINE) == 1
            return samples if settled and waved else None

        samples = await eventually(wave_done, "one Ready Instance after the scale-down wave", within=30)
        assert value(samples, "ome_omenative_scale_down_batch_pods_count", **MINE) == 1
        assert value(samples, "ome_omenative_scale_down_batch_pods_sum", **MINE) == 1
        assert value(samples, "ome_omenative_scale_down_deferred_instances", **MINE) == 0
        assert value(samples, "ome_kube_requests_total", verb="delete", resource="pods") is not None
