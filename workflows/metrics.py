"""The product metrics workflows emit (counters, histograms, and the §14 deferred-Instances
gauge), one typed helper per metric, through the workflow metric meter: they appear on the worker's `/metrics` (`OME_PROMETHEUS__WORKER_METRICS_ADDRESS`)
beside the Temporal SDK's, and nothing is emitted while a history replays, so a worker that
restarts does not count an Instance's creation twice. A metric call issues no workflow
command, so adding one needs no `workflow.patched`.

The meter labels everything with `task_queue` and `workflow_type`; `namespace` is overridden
with the Kubernetes namespace of the object (the Temporal namespace is the worker's anyway).
The canary metrics of spec reference §2.7 live in `workflows.rollout.canary_metrics`, built
on `meter` here. Histogram buckets are in `HISTOGRAM_BUCKETS`, which the worker's runtime
applies (`workers.client.metrics_runtime`).

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from temporalio import workflow
from temporalio.common import MetricMeter

INSTANCE_CREATE_TO_SERVING = "ome_instance_create_to_serving_seconds"
INSTANCE_FAILURE_TO_RECREATE = "ome_instance_pod_failure_to_recreate_seconds"
SCALE_DOWN_DEFERRED_INSTANCES = "ome_omenative_scale_down_deferred_instances"
SCALE_DOWN_BATCH_PODS = "ome_omenative_scale_down_batch_pods"
SCALE_DOWN_OVERSIZED_BATCH = "ome_omenative_scale_down_oversized_batch_total"
ROLLOUT_REPIN = "ome_rollout_repin_total"

SECONDS_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
"""An Instance comes up in seconds on kubesim and in minutes when an engine loads a large
model from a cold node; the 30-minute readiness deadline is the last step that matters."""
POD_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)
"""Pods per scale-down batch: the chart's budget is 100; an oversized Instance may exceed it."""
HISTOGRAM_BUCKETS: Mapping[str, tuple[float, ...]] = {
    INSTANCE_CREATE_TO_SERVING: SECONDS_BUCKETS,
    INSTANCE_FAILURE_TO_RECREATE: SECONDS_BUCKETS,
    SCALE_DOWN_BATCH_PODS: POD_BUCKETS,
}


def meter(namespace: str, **labels: str) -> MetricMeter:
    """The workflow meter with the object's Kubernetes `namespace` and `labels` on every series."""
    return workflow.metric_meter().with_additional_attributes({"namespace": namespace, **labels})


# --- Instances ---------------------------------------------------------------------------
# The state gauges (`ome_instances`, `ome_instance_drains_overdue`,
# `ome_rollout_hold_since_timestamp_seconds`, `ome_rollout_hold_deadline_timestamp_seconds`,
# `ome_omenative_scale_down_active_pods`, `ome_trafficmap_capacity_fallback_homes`) are not set
# here: a gauge in a worker's SDK runtime keeps its last value after the workflow moves to
# another worker, and with two workers each holds its own copy. The controller renders them
# from the InferenceReplica and TrafficMap objects at scrape time
# (`planning.controller.state_metrics`).


def instance_serving(namespace: str, isvc: str, component: str, after: timedelta) -> None:
    """An Instance's create operation ended serving, `after` its start."""
    meter(namespace, isvc=isvc, component=component).create_histogram_float(
        INSTANCE_CREATE_TO_SERVING, "time from an Instance's create to serving", "s"
    ).record(max(after.total_seconds(), 0.0))


def pod_recreated(namespace: str, isvc: str, component: str, after: timedelta) -> None:
    """A failed pod's Instance starts creating its pods again, `after` the failure."""
    meter(namespace, isvc=isvc, component=component).create_histogram_float(
        INSTANCE_FAILURE_TO_RECREATE, "time from a pod failure to the Instance's pods being recreated", "s"
    ).record(max(after.total_seconds(), 0.0))


# --- scale-down waves (spec reference §14) -------------------------------------------------


def scale_down_wave(
    namespace: str, isvc: str, component: str, deferred: int, batch_pods: int, oversized: bool
) -> None:
    """One scale-down wave: Instances deferred, the admitted batch's pods, and whether one
    Instance larger than the budget went alone. (The pods being removed are the controller's
    `ome_omenative_scale_down_active_pods`, from the InferenceReplica status.)

    The deferred gauge stays here, with its per-worker caveat: which Instances a wave deferred
    is the plan's alone, and no status field carries it for the controller to render."""
    labelled = meter(namespace, isvc=isvc, component=component)
    labelled.create_gauge(SCALE_DOWN_DEFERRED_INSTANCES, "Instances waiting for the next wave").set(deferred)
    if batch_pods:
        labelled.create_histogram(SCALE_DOWN_BATCH_PODS, "pods admitted per scale-down wave").record(batch_pods)
    if oversized:
        labelled.create_counter(SCALE_DOWN_OVERSIZED_BATCH, "waves of one Instance larger than the budget").add(1)


# --- rollouts and traffic maps ---------------------------------------------------------------


def rollout_repinned(namespace: str, outcome: str) -> None:
    """`ome_rollout_repin_total{outcome=applied|rejected}` (spec reference §4): the controller's
    own verdicts only; a request refused up front (OME's CLI refusals) or already matching
    counts as neither."""
    if outcome in ("applied", "rejected"):
        meter(namespace).create_counter(ROLLOUT_REPIN, "rollout repin requests by outcome").add(
            1, {"outcome": outcome}
        )

