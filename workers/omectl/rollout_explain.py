"""`omectl rollout explain`'s view: why a component waits and what would release it, in the
reference's explain views READY, DRIFT, HOLD, REVISIONS and TRAFFIC (spec reference §3.4, §4),
built from the InferenceService's `explain` answer and its `status` (no I/O).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from models.isvc_status import ComponentStatus
from workflows.service.messages import ExplainView, RolloutStatusView, ServiceStatusView

NOTHING = "-"


def explain_rows(
    explained: ExplainView, service: ServiceStatusView, rollout: RolloutStatusView
) -> list[tuple[str, str]]:
    """(view, value) rows in the order an operator reads them: where it stands, why it waits,
    what would release it, then the revisions and the recorded traffic."""
    component = service.status.components.get(explained.component, ComponentStatus())
    rows = [("COMPONENT", explained.component)]
    if explained.grouped:
        rows.append(("GROUP", f"{explained.group if explained.group is not None else NOTHING} (run {explained.run or NOTHING})"))
    else:
        rows.append(("GROUP", "none: rolls out on its own"))
    rows += [
        ("READY", explained.plan_ready or NOTHING),
        ("DRIFT", explained.drift or NOTHING),
        ("HOLD", hold_of(explained, service, rollout, component)),
        ("GATE", explained.gate or NOTHING),
        ("REASON", explained.reason or NOTHING),
        ("RELEASE", explained.release or NOTHING),
    ]
    if explained.time_left:
        rows.append(("TIME-LEFT", explained.time_left))
    if explained.limit is not None:
        rows.append(("LIMIT", f"{explained.limit} Instances on the new revision now"))
    rows += [
        ("CAPACITY", f"{explained.updated}/{explained.replicas}"),
        ("REVISIONS", revisions_of(explained, component)),
        ("TRAFFIC", traffic_of(explained.component, component)),
        ("SUMMARY", explained.summary or NOTHING),
    ]
    return rows


def hold_of(
    explained: ExplainView, service: ServiceStatusView, rollout: RolloutStatusView, component: ComponentStatus
) -> str:
    """HOLD: `GlobalPause` (the service is paused), `PlanParked` (the run's plan does not
    resolve), `CanaryPreStep` (a repin left the canary before its step), `ObservedPaused` (the
    component's group waits at a gate), or `None`."""
    if service.pause:
        return "GlobalPause"
    if rollout.parked_reason:
        return f"PlanParked ({rollout.parked_reason})"
    if component.canary is not None and component.canary.pre_step_hold:
        return "CanaryPreStep"
    row = next((r for r in rollout.rows if r.component == explained.component), None)
    if row is not None and "Paused" in (row.phase, row.group_phase):
        return "ObservedPaused"
    return "None"


def revisions_of(explained: ExplainView, component: ComponentStatus) -> str:
    """`stable=,target=,rejected=`: a canary's hashes, else the lifecycle's revisions."""
    canary, lifecycle = component.canary, component.lifecycle
    if canary is not None:
        stable, target, rejected = (
            canary.stable_revision_hash, canary.canary_revision_hash, canary.rolled_back_revision_hash
        )
    else:
        stable = lifecycle.current_revision if lifecycle is not None else None
        target = explained.target or (lifecycle.update_revision if lifecycle is not None else None)
        rejected = None
    return f"stable={stable or ''},target={target or ''},rejected={rejected or ''}"


def traffic_of(name: str, component: ComponentStatus) -> str:
    """`component:revision=percent` per recorded share (spec reference §1.7: recorded, not routed)."""
    if not component.traffic:
        return NOTHING
    return ",".join(f"{name}:{share.revision_name}={share.percent}" for share in component.traffic)


def explain_table(rows: list[tuple[str, str]]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for view, value in rows:
        table.add_row(view, value)
    return table


def explain_json(explained: ExplainView, rows: list[tuple[str, str]]) -> dict[str, Any]:
    return {"explain": explained.model_dump(mode="json"), "views": dict(rows)}
