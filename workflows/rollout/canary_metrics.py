"""The `ome_canary_*` metrics of spec reference §2.7, emitted by the Rollout through the
workflow metric meter, so they appear on the worker's `/metrics` (`OME_PROMETHEUS__WORKER_METRICS_ADDRESS`)
and are not counted again when a history is replayed. The meter and its labels are
`workflows.metrics.meter`'s.

Labels: `namespace`, `isvc`, `component` (the canary group's primary), and `result`,
`metric` or `cause` where the reference names them; `ome_canary_complete_total` carries
`namespace` and `isvc` only (§2.7). The sampler's own gauges
(`ome_canary_sampler_*`) come from the sample activity.
"""

from __future__ import annotations

from planning.rollout.canary.decision import CanaryDecision
from planning.rollout.canary.state import CanaryState
from workflows import metrics


def record(namespace: str, isvc: str, before: CanaryState, decision: CanaryDecision) -> None:
    """What one call of the canary machine changed, as metrics."""
    after = decision.state
    meter = metrics.meter(namespace, isvc=isvc, component=after.primary)
    meter.create_gauge("ome_canary_current_step", "0-based step of the canary").set(after.current_step)
    weight = 0 if after.phase in ("Stable", "RollingBack", "RolledBack") else after.observed_traffic_weight
    meter.create_gauge("ome_canary_traffic_weight", "recorded traffic weight of the canary revision").set(weight)
    meter.create_gauge("ome_canary_analysis_failed_checks", "failing samples at this step").set(
        after.analysis_failed_checks
    )
    if after.current_step > before.current_step and after.target_id == before.target_id:
        meter.create_counter("ome_canary_step_total", "canary steps passed").add(after.current_step - before.current_step)
    if decision.outcome == "Completed":
        # §2.7: {namespace, isvc} only, whichever component the canary group moved.
        metrics.meter(namespace, isvc=isvc).create_counter(
            "ome_canary_complete_total", "canaries that reached Stable"
        ).add(1)
    if decision.rollback_started is not None:
        meter.create_counter("ome_canary_rollback_total", "canary rollbacks by cause").add(
            1, {"cause": decision.rollback_started}
        )
    if after.last_evaluation_time != before.last_evaluation_time and after.last_verdict is not None:
        meter.create_counter("ome_canary_analysis_evaluations_total", "samples judged, by result").add(
            1, {"result": after.last_verdict.lower()}
        )
        values = meter.create_gauge_float("ome_canary_analysis_metric_value", "last value of each analysis metric")
        for result in after.metric_results:
            value = str(result.get("value") or "")
            try:
                values.set(float(value), {"metric": str(result.get("name"))})
            except ValueError:
                continue  # inconclusive: no value to show
