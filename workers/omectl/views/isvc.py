"""`omectl get isvc`: one row per InferenceService from its workflow's `status` query:
`NAME PHASE GENERATION READY PAUSED COMPONENTS AGE`, COMPONENTS each OMENative component's
`name=serving/current` Instances; wide adds ROLLOUT (each component's rollout phase) and HOLD
(each held component's `rolloutHold` gate)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workers.omectl.views.table import NONE, Table, age, table
from workflows.service.messages import ServiceStatusView

HEADERS = ("NAME", "PHASE", "GENERATION", "READY", "PAUSED", "COMPONENTS", "AGE")
WIDE_HEADERS = ("ROLLOUT", "HOLD")


def ready(view: ServiceStatusView) -> str:
    found = view.status.condition("Ready")
    return found.status if found is not None else "Unknown"


def paused(view: ServiceStatusView) -> str:
    return view.pause if view.pause is not None else "false"


def components(view: ServiceStatusView) -> str:
    shown = [
        f"{name}={status.lifecycle.serving_replicas}/{status.lifecycle.replicas}"
        for name, status in view.status.components.items()
        if status.lifecycle is not None
    ]
    return ",".join(shown) or NONE


def rollout(view: ServiceStatusView) -> str:
    shown = [f"{name}={status.rollout_phase}" for name, status in view.status.components.items() if status.rollout_phase]
    return ",".join(shown) or NONE


def holds(view: ServiceStatusView) -> str:
    shown = [
        f"{name}={status.lifecycle.rollout_hold.gate}"
        for name, status in view.status.components.items()
        if status.lifecycle is not None and status.lifecycle.rollout_hold is not None
    ]
    return ",".join(shown) or NONE


def row(view: ServiceStatusView, started: datetime | None, now: datetime, wide: bool = False) -> tuple[str, ...]:
    cells = (view.name, view.phase, str(view.generation), ready(view), paused(view), components(view), age(started, now))
    return (*cells, rollout(view), holds(view)) if wide else cells


def isvc_table(services: Sequence[tuple[ServiceStatusView, datetime | None]], now: datetime, wide: bool = False) -> Table:
    return table(HEADERS + WIDE_HEADERS if wide else HEADERS, [row(view, started, now, wide) for view, started in services])
